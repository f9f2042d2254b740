SELECT
  CASE
    WHEN GROUPING(task) = 0
    THEN 1
    WHEN GROUPING(app_version) = 0
    THEN 2
    WHEN GROUPING(os_version) = 0
    THEN 3
    WHEN GROUPING(soc) = 0
    THEN 4
    ELSE 0
  END AS dim,
  task,
  device_tier,
  app_version,
  os_version,
  soc,
  COALESCE(SUM(rows) FILTER(WHERE
    route = 'cloud'), 0) AS cloud,
  COALESCE(SUM(rows) FILTER(WHERE
    route <> 'cloud'), 0) AS edge,
  0 AS both_arms
FROM rollup_device_day
WHERE
  release = :release
  AND day >= CAST(:window_start AS DATE)
  AND day < CAST(:window_end AS DATE)
  AND network_bucket <> :bucket_offline
GROUP BY
  GROUPING SETS (
    (),
    (task, device_tier),
    (
      app_version
    ),
    (
      os_version
    ),
    (
      soc
    )
  )
