WITH picked AS (
  SELECT
    task,
    device_tier,
    device_id,
    total_n,
    log_total_sum,
    log_total_sq,
    CASE WHEN route = 'cloud' THEN 'cloud' ELSE 'edge' END AS side
  FROM rollup_device_day
  WHERE
    release = :release
    AND day >= CAST(:window_start AS DATE)
    AND day < CAST(:window_end AS DATE)
    AND network_bucket = :bucket_weak
    AND total_n > 0
), per_device AS (
  SELECT
    side,
    task,
    device_tier,
    GROUPING(device_tier) * 2 AS level,
    device_id,
    SUM(total_n) AS n,
    SUM(log_total_sum) AS s,
    SUM(log_total_sq) AS q
  FROM picked
  GROUP BY
    GROUPING SETS (
      (side, task, device_tier, device_id),
      (side, task, device_id)
    )
)
SELECT
  side,
  task,
  device_tier,
  :bucket_weak AS network_bucket,
  level,
  COUNT(*) AS devices,
  SUM(n) AS total_n,
  SUM(n * n) AS total_n_nn,
  SUM(s) AS log_sum,
  SUM(q) AS log_sq,
  SUM(s * s / n) AS log_between
FROM per_device
GROUP BY
  side,
  task,
  device_tier,
  level
