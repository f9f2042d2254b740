-- name: kept_device_days
-- description: release-wide edge device-days and kill days of the segments that stay on the edge (all but $excluded), summed per device
-- params: release, window_start, window_end, kill_codes, excluded
-- $excluded lists the segments this evaluation rolls back, as 'task/tier/bucket'. What is left is the edge
-- traffic the release keeps: kill_rate's release-wide check is judged on it when segments roll back.
WITH picked AS (
    SELECT device_id, day, coalesce(list_contains($kill_codes, error_code), false) AS killed
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end AND on_device
      AND NOT list_contains($excluded, concat_ws('/', task, device_tier, network_bucket))
),
per_device AS (
    SELECT device_id, count(DISTINCT day) AS days, count(DISTINCT day) FILTER (WHERE killed) AS kill_days
    FROM picked GROUP BY device_id
)
SELECT count(*) AS devices, sum(days) AS days, sum(days * days) AS days_nn,
       sum(kill_days) AS kill_days, sum(kill_days * kill_days) AS kill_days_kk, sum(kill_days * days) AS kill_days_kn
FROM per_device
