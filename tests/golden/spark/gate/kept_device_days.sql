WITH picked AS (
  SELECT
    device_id,
    day,
    COALESCE(ARRAY_CONTAINS(:kill_codes, error_code), FALSE) AS killed
  FROM events_enriched
  WHERE
    release = :release
    AND event_time >= :window_start
    AND event_time < :window_end
    AND on_device
    AND NOT ARRAY_CONTAINS(:excluded, CONCAT_WS('/', task, device_tier, network_bucket))
), per_device AS (
  SELECT
    device_id,
    COUNT(DISTINCT day) AS days,
    COUNT(DISTINCT day) FILTER(WHERE
      killed) AS kill_days
  FROM picked
  GROUP BY
    device_id
)
SELECT
  COUNT(*) AS devices,
  SUM(days) AS days,
  SUM(days * days) AS days_nn,
  SUM(kill_days) AS kill_days,
  SUM(kill_days * kill_days) AS kill_days_kk,
  SUM(kill_days * days) AS kill_days_kn
FROM per_device
