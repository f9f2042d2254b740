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
  PERCENTILE(peak_mem_ratio, :fractions) AS peak_q,
  PERCENTILE(resident_mem_ratio, :fractions) AS resident_q,
  PERCENTILE(total_ms, :fractions) AS total_q,
  PERCENTILE(cold_start_ms, :fractions) AS cold_q,
  PERCENTILE(temp_rise_c, :fractions) AS rise_q
FROM picked
GROUP BY
  GROUPING SETS (
    (side, task, device_tier, network_bucket),
    (side, task, network_bucket)
  )
