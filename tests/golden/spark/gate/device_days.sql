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
  GROUP BY
    device_id,
    day
), segment_days AS (
  SELECT DISTINCT
    task,
    device_tier,
    network_bucket,
    device_id,
    day
  FROM picked
), per_device AS (
  SELECT
    s.task,
    s.device_tier,
    s.network_bucket,
    s.device_id,
    COUNT(*) AS days,
    COUNT(*) FILTER(WHERE
      t.edge_seconds > (
        SELECT
          daily_edge_seconds_cap
        FROM settings_in_effect
      )) AS over_cap
  FROM segment_days AS s
  JOIN totals AS t
    ON s.device_id = t.device_id AND s.day = t.day
  GROUP BY
    s.task,
    s.device_tier,
    s.network_bucket,
    s.device_id
)
SELECT
  task,
  device_tier,
  network_bucket,
  COUNT(*) AS devices,
  SUM(days) AS days,
  SUM(days * days) AS days_nn,
  SUM(over_cap) AS over_cap,
  SUM(over_cap * over_cap) AS over_cap_kk,
  SUM(over_cap * days) AS over_cap_kn
FROM per_device
GROUP BY
  task,
  device_tier,
  network_bucket
