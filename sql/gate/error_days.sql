-- name: error_days
-- description: per segment, per device tier and release-wide, the edge device-days with each error_code (reported beside kill_rate), from the device-day rollup
-- params: release, window_start, window_end
WITH coded AS (
    SELECT task, device_tier, network_bucket, device_id, day, unnest(error_codes) AS error_code
    FROM rollup_device_day
    WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
      AND route <> 'cloud'
),
level_days AS (
    SELECT task, device_tier, network_bucket, error_code,
           grouping(task) * 4 + grouping(device_tier) * 2 + grouping(network_bucket) AS level
    FROM coded
    GROUP BY GROUPING SETS ((task, device_tier, network_bucket, error_code, device_id, day),
                            (device_tier, error_code, device_id, day), (error_code, device_id, day))
)
SELECT task, device_tier, network_bucket, level, error_code, count(*) AS device_days
FROM level_days
GROUP BY task, device_tier, network_bucket, level, error_code
