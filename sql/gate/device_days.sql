-- name: device_days
-- description: per segment, the device-days with edge use in it and how many went over the daily edge-seconds cap, summed per device (the unit of independence)
-- params: release, window_start, window_end
-- The cap is on a device's whole day of edge inference, across tasks and networks.
WITH picked AS (
    SELECT task, device_tier, network_bucket, device_id, day, total_ms
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end AND on_device
),
totals AS (
    SELECT device_id, day, sum(total_ms) / 1000.0 AS edge_seconds FROM picked GROUP BY device_id, day
),
segment_days AS (
    SELECT DISTINCT task, device_tier, network_bucket, device_id, day FROM picked
),
per_device AS (
    SELECT s.task, s.device_tier, s.network_bucket, s.device_id, count(*) AS days,
           count(*) FILTER (WHERE t.edge_seconds > (SELECT daily_edge_seconds_cap FROM settings_in_effect)) AS over_cap
    FROM segment_days s JOIN totals t ON s.device_id = t.device_id AND s.day = t.day
    GROUP BY s.task, s.device_tier, s.network_bucket, s.device_id
)
SELECT task, device_tier, network_bucket, count(*) AS devices,
       sum(days) AS days, sum(days * days) AS days_nn,
       sum(over_cap) AS over_cap, sum(over_cap * over_cap) AS over_cap_kk, sum(over_cap * days) AS over_cap_kn
FROM per_device
GROUP BY task, device_tier, network_bucket
