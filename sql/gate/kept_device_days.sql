-- name: kept_device_days
-- description: release-wide edge device-days and kill days of the segments that stay on the edge (all but $excluded), summed per device, from the device-day rollup
-- params: release, window_start, window_end, kill_codes, excluded
-- $excluded lists the segments this evaluation rolls back, as 'task/tier/bucket'. What is left is the edge
-- traffic the release keeps: kill_rate's release-wide check is judged on it when segments roll back.
WITH picked AS (
    SELECT device_id, day, list_has_any(error_codes, $kill_codes) AS killed
    FROM rollup_device_day
    WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
      AND route <> 'cloud' AND NOT list_contains($excluded, concat_ws('/', task, device_tier, network_bucket))
),
per_device AS (
    SELECT device_id, count(DISTINCT day) AS days, count(DISTINCT day) FILTER (WHERE killed) AS kill_days
    FROM picked GROUP BY device_id
)
SELECT count(*) AS devices, sum(days) AS days, sum(days * days) AS days_nn,
       sum(kill_days) AS kill_days, sum(kill_days * kill_days) AS kill_days_kk, sum(kill_days * days) AS kill_days_kn
FROM per_device
