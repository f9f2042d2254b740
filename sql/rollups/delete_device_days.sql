-- name: delete_device_days
-- description: drop the device-day rows of the touched days before they are recomputed
DELETE FROM rollup_device_day r USING touched_days t WHERE r.release = t.release AND r.day = t.day
