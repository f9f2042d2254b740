WITH devices AS (
  SELECT
    device_id,
    MIN(device_tier) AS device_tier,
    MIN_BY(task, event_time) AS task,
    MIN(event_time) AS first_seen,
    MAX(event_time) AS last_seen,
    BOOL_OR(on_device AND network_bucket <> :bucket_offline) AS on_edge,
    BOOL_OR(NOT on_device AND network_bucket <> :bucket_offline) AS on_cloud
  FROM events_enriched
  WHERE
    release = :release AND event_time >= :window_start AND event_time < :window_end
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
