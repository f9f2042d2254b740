WITH picked AS (
  SELECT
    *,
    CASE WHEN on_device THEN 'edge' ELSE 'cloud' END AS side
  FROM events_enriched
  WHERE
    release = :release AND event_time >= :window_start AND event_time < :window_end
)
SELECT
  side,
  task,
  device_tier,
  network_bucket,
  (GROUPING(task) * 4 + GROUPING(device_tier) * 2 + GROUPING(network_bucket)) AS level,
  COUNT(*) AS rows,
  COUNT(peak_mem_ratio) AS peak_n,
  COUNT(resident_mem_ratio) AS resident_n,
  COUNT(total_ms) AS total_n,
  COUNT(cold_start_ms) AS cold_n,
  COUNT(temp_rise_c) AS rise_n,
  COUNT(throttled) AS throttled_n,
  COUNT(*) FILTER(WHERE
    throttled) AS throttled,
  COUNT(*) FILTER(WHERE
    adopted) AS adopted,
  COUNT(*) FILTER(WHERE
    fallback) AS fallbacks,
  COUNT(*) FILTER(WHERE
    failure) AS failures,
  COUNT(*) FILTER(WHERE
    failure AND detected_failure) AS detected
FROM picked
GROUP BY
  GROUPING SETS (
    (side, task, device_tier, network_bucket),
    (side, task, device_tier),
    (side, task, network_bucket),
    (side, task),
    (
      side
    )
  )
