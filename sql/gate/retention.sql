-- name: retention
-- description: per arm and first task x tier, and per arm release-wide, the devices first seen early enough in the window to be seen again horizon days later, and how many were (the retention guardrail, unit device), from the device-day rollup
-- params: release, window_start, window_end, cohort_end, horizon_seconds
-- A device's arm is its online requests' (only edge or only cloud; a device on both is a leak the assignment
-- check counts, and is left out here); its task is its first request's. It is in the cohort when its first
-- request in the window comes before $cohort_end (window end - horizon), and it returned when it has any
-- request of the release at least the horizon after its first. arm_devices counts every device of the arm (the
-- users a drop in returning applies to: pipeline ledger prices it).
WITH devices AS (
    SELECT device_id, min(device_tier) AS device_tier, arg_min(task, first_at) AS task,
           min(first_at) AS first_seen, max(last_at) AS last_seen,
           bool_or(route <> 'cloud' AND network_bucket <> $bucket_offline) AS on_edge,
           bool_or(route = 'cloud' AND network_bucket <> $bucket_offline) AS on_cloud
    FROM rollup_device_day
    WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
    GROUP BY device_id
),
arms AS (
    SELECT task, device_tier, CASE WHEN on_cloud THEN 'cloud' ELSE 'edge' END AS side,
           first_seen < $cohort_end AS in_cohort,
           epoch(last_seen) - epoch(first_seen) >= $horizon_seconds AS returned
    FROM devices
    WHERE on_edge <> on_cloud
)
SELECT side, task, device_tier, grouping(task) * 4 + grouping(device_tier) * 2 AS level,  -- 0 task x tier, 6 release
       count(*) FILTER (WHERE in_cohort) AS devices, count(*) FILTER (WHERE in_cohort AND returned) AS returned,
       count(*) AS arm_devices
FROM arms
GROUP BY GROUPING SETS ((side, task, device_tier), (side))
