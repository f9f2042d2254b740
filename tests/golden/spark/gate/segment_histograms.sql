WITH h AS (
  SELECT
    CASE WHEN route = 'cloud' THEN 'cloud' ELSE 'edge' END AS side,
    task,
    device_tier,
    network_bucket,
    figure,
    bin,
    n
  FROM rollup_hist
  WHERE
    release = :release
    AND day >= CAST(:window_start AS DATE)
    AND day < CAST(:window_end AS DATE)
    AND figure <> 'lag'
)
SELECT
  side,
  task,
  device_tier,
  network_bucket,
  (GROUPING(task) * 4 + GROUPING(device_tier) * 2 + GROUPING(network_bucket)) AS level,
  figure,
  bin,
  SUM(n) AS n
FROM h
GROUP BY
  GROUPING SETS (
    (side, task, device_tier, network_bucket, figure, bin),
    (side, task, network_bucket, figure, bin)
  )
ORDER BY
  side NULLS LAST,
  task NULLS LAST,
  device_tier NULLS LAST,
  network_bucket NULLS LAST,
  level NULLS LAST,
  figure NULLS LAST,
  bin NULLS LAST
