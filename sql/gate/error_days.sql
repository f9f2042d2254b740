-- name: error_days
-- description: per segment and release-wide, the edge device-days with each error_code (reported beside kill_rate)
-- params: release, window_start, window_end
WITH coded AS (
    SELECT task, device_tier, network_bucket, device_id, day, error_code
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end AND on_device
      AND error_code IS NOT NULL
),
level_days AS (
    SELECT task, device_tier, network_bucket, error_code,
           grouping(task) * 4 + grouping(device_tier) * 2 + grouping(network_bucket) AS level
    FROM coded
    GROUP BY GROUPING SETS ((task, device_tier, network_bucket, error_code, device_id, day), (error_code, device_id, day))
)
SELECT task, device_tier, network_bucket, level, error_code, count(*) AS device_days
FROM level_days
GROUP BY task, device_tier, network_bucket, level, error_code
