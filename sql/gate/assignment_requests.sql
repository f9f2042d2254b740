-- name: assignment_requests
-- description: the online requests on each arm (edge: on_device; cloud: the hold-back), release-wide, per task x tier and per app_version, os_version and soc (the sample-ratio-mismatch check, unit request)
-- params: release, window_start, window_end
-- Offline requests cannot reach the cloud, so they are on no arm. dims: 0 release, 1 task x tier, 2 app_version,
-- 3 os_version, 4 soc (a null value is its own cell). Read from the device-day rollup: a device-day's requests
-- count under its app_version, os_version and soc of that day (its last request's).
SELECT CASE WHEN grouping(task) = 0 THEN 1 WHEN grouping(app_version) = 0 THEN 2
            WHEN grouping(os_version) = 0 THEN 3 WHEN grouping(soc) = 0 THEN 4 ELSE 0 END AS dim,
       task, device_tier, app_version, os_version, soc,
       coalesce(sum(rows) FILTER (WHERE route = 'cloud'), 0) AS cloud,
       coalesce(sum(rows) FILTER (WHERE route <> 'cloud'), 0) AS edge,
       0 AS both_arms
FROM rollup_device_day
WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
  AND network_bucket <> $bucket_offline
GROUP BY GROUPING SETS ((), (task, device_tier), (app_version), (os_version), (soc))
