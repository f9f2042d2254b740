-- name: device_days
-- description: per segment, the device-days with edge use in it, and how many went over the daily edge-seconds cap
-- params: release, window_start, window_end
-- The cap is on a device's whole day of edge inference, across tasks and networks.
WITH picked AS (
    SELECT task, device_tier, network_bucket, device_id, day, total_ms
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end AND on_device
),
totals AS (
    SELECT device_id, day, sum(total_ms) / 1000.0 AS edge_seconds FROM picked GROUP BY ALL
),
segment_days AS (
    SELECT DISTINCT task, device_tier, network_bucket, device_id, day FROM picked
)
SELECT s.task, s.device_tier, s.network_bucket, count(*) AS device_days,
       count(*) FILTER (WHERE t.edge_seconds > (SELECT daily_edge_seconds_cap FROM settings_in_effect)) AS over_cap
FROM segment_days s JOIN totals t USING (device_id, day)
GROUP BY ALL
