WITH picked AS (
  SELECT
    device_id,
    day,
    ARRAYS_OVERLAP(error_codes, :kill_codes) AS killed
  FROM rollup_device_day
  WHERE
    release = :release
    AND day >= CAST(:window_start AS DATE)
    AND day < CAST(:window_end AS DATE)
    AND route <> 'cloud'
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
