-- name: dropped_device_days
-- description: the snapshot being built (catalog `main`) drops the device-day roll-up's days the warehouse (catalog `warehouse`) dropped (archive.device_day_days)
DELETE FROM main.rollup_device_day s
WHERE NOT EXISTS (SELECT 1 FROM warehouse.main.rollup_device_day w WHERE w.release = s.release AND w.day = s.day)
