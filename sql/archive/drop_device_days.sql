-- name: drop_device_days
-- description: the gate's device-day rollup keeps archive.device_day_days days; older rows are deleted; returns the count
-- params: cutoff (date)
DELETE FROM rollup_device_day WHERE day < CAST($cutoff AS DATE)
