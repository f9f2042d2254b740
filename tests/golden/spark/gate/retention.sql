WITH devices AS (
  SELECT
    device_id,
    MIN(device_tier) AS device_tier,
    MIN_BY(task, first_at) AS task,
    MIN(first_at) AS first_seen,
    MAX(last_at) AS last_seen,
    BOOL_OR(route <> 'cloud' AND network_bucket <> :bucket_offline) AS on_edge,
    BOOL_OR(route = 'cloud' AND network_bucket <> :bucket_offline) AS on_cloud
  FROM rollup_device_day
  WHERE
    release = :release
    AND day >= CAST(:window_start AS DATE)
    AND day < CAST(:window_end AS DATE)
  GROUP BY
    device_id
), arms AS (
  SELECT
    task,
    device_tier,
    CASE WHEN on_cloud THEN 'cloud' ELSE 'edge' END AS side,
    first_seen < :cohort_end AS in_cohort,
    UNIX_TIMESTAMP(last_seen) - UNIX_TIMESTAMP(first_seen) >= :horizon_seconds AS returned
  FROM devices
  WHERE
    on_edge <> on_cloud
)
SELECT
  side,
  task,
  device_tier,
  GROUPING(task) * 4 + GROUPING(device_tier) * 2 AS level,
  COUNT(*) FILTER(WHERE
    in_cohort) AS devices,
  COUNT(*) FILTER(WHERE
    in_cohort AND returned) AS returned,
  COUNT(*) AS arm_devices
FROM arms
GROUP BY
  GROUPING SETS (
    (side, task, device_tier),
    (
      side
    )
  )
