WITH picked AS (
  SELECT
    task,
    device_tier,
    device_id,
    total_ms,
    CASE WHEN on_device THEN 'edge' ELSE 'cloud' END AS side
  FROM events_enriched
  WHERE
    release = :release
    AND event_time >= :window_start
    AND event_time < :window_end
    AND network_bucket = :bucket_weak
    AND NOT total_ms IS NULL
), p95s AS (
  SELECT
    side,
    task,
    device_tier,
    GROUPING(device_tier) * 2 AS level,
    PERCENTILE(total_ms, 0.95) AS p95
  FROM picked
  GROUP BY
    GROUPING SETS (
      (side, task, device_tier),
      (side, task)
    )
), per_device AS (
  SELECT
    q.side,
    q.task,
    q.device_tier,
    q.level,
    p.device_id,
    COUNT(*) AS total_n,
    COUNT(*) FILTER(WHERE
      p.total_ms > q.p95) AS above
  FROM p95s AS q
  JOIN picked AS p
    ON p.side = q.side
    AND p.task = q.task
    AND (
      q.level = 2 OR p.device_tier = q.device_tier
    )
  GROUP BY
    q.side,
    q.task,
    q.device_tier,
    q.level,
    p.device_id
)
SELECT
  side,
  task,
  device_tier,
  :bucket_weak AS network_bucket,
  level,
  COUNT(*) AS devices,
  SUM(total_n) AS total_n,
  SUM(total_n * total_n) AS total_n_nn,
  SUM(above) AS above,
  SUM(above * above) AS above_kk,
  SUM(above * total_n) AS above_kn
FROM per_device
GROUP BY
  side,
  task,
  device_tier,
  level
