WITH per_device AS (
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
    device_id,
    BOOL_OR(route <> 'cloud') AS on_edge,
    BOOL_OR(route = 'cloud') AS on_cloud
  FROM rollup_device_day
  WHERE
    release = :release
    AND day >= CAST(:window_start AS DATE)
    AND day < CAST(:window_end AS DATE)
    AND network_bucket <> :bucket_offline
  GROUP BY
    GROUPING SETS (
      (
        device_id
      ),
      (task, device_tier, device_id),
      (app_version, device_id),
      (os_version, device_id),
      (soc, device_id)
    )
)
SELECT
  dim,
  task,
  device_tier,
  app_version,
  os_version,
  soc,
  COUNT(*) FILTER(WHERE
    on_cloud AND NOT on_edge) AS cloud,
  COUNT(*) FILTER(WHERE
    on_edge AND NOT on_cloud) AS edge,
  COUNT(*) FILTER(WHERE
    on_edge AND on_cloud) AS both_arms
FROM per_device
GROUP BY
  dim,
  task,
  device_tier,
  app_version,
  os_version,
  soc
