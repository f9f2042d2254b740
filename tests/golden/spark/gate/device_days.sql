WITH picked AS (
  SELECT
    task,
    device_tier,
    network_bucket,
    device_id,
    day,
    total_ms
  FROM events_enriched
  WHERE
    release = :release
    AND event_time >= :window_start
    AND event_time < :window_end
    AND on_device
), totals AS (
  SELECT
    device_id,
    day,
    SUM(total_ms) / 1000.0 AS edge_seconds
  FROM picked
  GROUP BY ALL
), segment_days AS (
  SELECT DISTINCT
    task,
    device_tier,
    network_bucket,
    device_id,
    day
  FROM picked
)
SELECT
  s.task,
  s.device_tier,
  s.network_bucket,
  COUNT(*) AS device_days,
  COUNT(*) FILTER(WHERE
    t.edge_seconds > (
      SELECT
        daily_edge_seconds_cap
      FROM settings_in_effect
    )) AS over_cap
FROM segment_days AS s
JOIN totals AS t
  USING (device_id, day)
GROUP BY ALL
