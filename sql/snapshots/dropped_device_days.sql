-- name: dropped_device_days
-- description: the snapshot being built (catalog `main`) drops the device-day roll-up's days the warehouse (catalog `warehouse`) dropped (archive.device_day_days: every day before a cutoff)
-- A day that left for another reason was recomputed, so changed_days has it.
DELETE FROM main.rollup_device_day
WHERE day < (SELECT coalesce(min(day), DATE '9999-12-31') FROM warehouse.main.rollup_device_day)
