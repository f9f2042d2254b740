WITH coded AS (
  SELECT
    task,
    device_tier,
    network_bucket,
    device_id,
    day,
    EXPLODE(error_codes) AS error_code
  FROM rollup_device_day
  WHERE
    release = :release
    AND day >= CAST(:window_start AS DATE)
    AND day < CAST(:window_end AS DATE)
    AND route <> 'cloud'
), level_days AS (
  SELECT
    task,
    device_tier,
    network_bucket,
    error_code,
    GROUPING(task) * 4 + GROUPING(device_tier) * 2 + GROUPING(network_bucket) AS level
  FROM coded
  GROUP BY
    GROUPING SETS (
      (task, device_tier, network_bucket, error_code, device_id, day),
      (device_tier, error_code, device_id, day),
      (error_code, device_id, day)
    )
)
SELECT
  task,
  device_tier,
  network_bucket,
  level,
  error_code,
  COUNT(*) AS device_days
FROM level_days
GROUP BY
  task,
  device_tier,
  network_bucket,
  level,
  error_code
