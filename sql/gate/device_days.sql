-- name: device_days
-- description: per segment, device-days of edge use and how many went over the daily edge-seconds cap
-- params: release, window_start, window_end
WITH per_device AS (
    SELECT task, device_tier, network_bucket, device_id, day, sum(total_ms) / 1000.0 AS edge_seconds
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end AND on_device
    GROUP BY ALL
)
SELECT task, device_tier, network_bucket, count(*) AS device_days,
       count(*) FILTER (WHERE edge_seconds > (SELECT daily_edge_seconds_cap FROM settings_in_effect)) AS over_cap
FROM per_device
GROUP BY ALL
