-- name: assignment_devices
-- description: the devices on each arm by their online requests (only edge: edge; only cloud: the hold-back; both: a leak), release-wide, per task x tier and per app_version, os_version and soc (the sample-ratio-mismatch check, unit device)
-- params: release, window_start, window_end
-- Offline requests cannot reach the cloud, so they place a device on no arm. dims as in assignment_requests.sql;
-- a device is counted in each task x tier (and app_version, ...) cell it has online requests in.
WITH per_device AS (
    SELECT CASE WHEN grouping(task) = 0 THEN 1 WHEN grouping(app_version) = 0 THEN 2
                WHEN grouping(os_version) = 0 THEN 3 WHEN grouping(soc) = 0 THEN 4 ELSE 0 END AS dim,
           task, device_tier, app_version, os_version, soc, device_id,
           bool_or(route <> 'cloud') AS on_edge, bool_or(route = 'cloud') AS on_cloud
    FROM rollup_device_day
    WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
      AND network_bucket <> $bucket_offline
    GROUP BY GROUPING SETS ((device_id), (task, device_tier, device_id), (app_version, device_id),
                            (os_version, device_id), (soc, device_id))
)
SELECT dim, task, device_tier, app_version, os_version, soc,
       count(*) FILTER (WHERE on_cloud AND NOT on_edge) AS cloud,
       count(*) FILTER (WHERE on_edge AND NOT on_cloud) AS edge,
       count(*) FILTER (WHERE on_edge AND on_cloud) AS both_arms
FROM per_device
GROUP BY dim, task, device_tier, app_version, os_version, soc
