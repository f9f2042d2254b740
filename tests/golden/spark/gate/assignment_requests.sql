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
  COUNT(*) FILTER(WHERE
    NOT on_device) AS cloud,
  COUNT(*) FILTER(WHERE
    on_device) AS edge,
  0 AS both_arms
FROM events_enriched
WHERE
  release = :release
  AND event_time >= :window_start
  AND event_time < :window_end
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
