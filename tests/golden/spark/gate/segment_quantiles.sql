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
  GROUPING(task) * 4 + GROUPING(device_tier) * 2 + GROUPING(network_bucket) AS level,
  PERCENTILE(peak_mem_ratio, 0.95) AS peak_p95,
  ELEMENT_AT(TRANSFORM(ARRAY(ARRAY_SORT(COLLECT_LIST(peak_mem_ratio))), s -> CASE WHEN SIZE(s) = 0 THEN NULL ELSE TRANSFORM(:fractions, q -> ELEMENT_AT(s, GREATEST(1, CAST(CEIL(SIZE(s) * CAST(q AS DECIMAL(20, 10))) AS INT)))) END), 1) AS peak_grid,
  PERCENTILE(resident_mem_ratio, 0.95) AS resident_p95,
  ELEMENT_AT(TRANSFORM(ARRAY(ARRAY_SORT(COLLECT_LIST(resident_mem_ratio))), s -> CASE WHEN SIZE(s) = 0 THEN NULL ELSE TRANSFORM(:fractions, q -> ELEMENT_AT(s, GREATEST(1, CAST(CEIL(SIZE(s) * CAST(q AS DECIMAL(20, 10))) AS INT)))) END), 1) AS resident_grid,
  PERCENTILE(total_ms, 0.95) AS total_p95,
  ELEMENT_AT(TRANSFORM(ARRAY(ARRAY_SORT(COLLECT_LIST(total_ms))), s -> CASE WHEN SIZE(s) = 0 THEN NULL ELSE TRANSFORM(:fractions, q -> ELEMENT_AT(s, GREATEST(1, CAST(CEIL(SIZE(s) * CAST(q AS DECIMAL(20, 10))) AS INT)))) END), 1) AS total_grid,
  PERCENTILE(cold_start_ms, 0.95) AS cold_p95,
  ELEMENT_AT(TRANSFORM(ARRAY(ARRAY_SORT(COLLECT_LIST(cold_start_ms))), s -> CASE WHEN SIZE(s) = 0 THEN NULL ELSE TRANSFORM(:fractions, q -> ELEMENT_AT(s, GREATEST(1, CAST(CEIL(SIZE(s) * CAST(q AS DECIMAL(20, 10))) AS INT)))) END), 1) AS cold_grid,
  PERCENTILE(temp_rise_c, 0.95) AS rise_p95,
  ELEMENT_AT(TRANSFORM(ARRAY(ARRAY_SORT(COLLECT_LIST(temp_rise_c))), s -> CASE WHEN SIZE(s) = 0 THEN NULL ELSE TRANSFORM(:fractions, q -> ELEMENT_AT(s, GREATEST(1, CAST(CEIL(SIZE(s) * CAST(q AS DECIMAL(20, 10))) AS INT)))) END), 1) AS rise_grid
FROM picked
GROUP BY
  GROUPING SETS (
    (side, task, device_tier, network_bucket),
    (side, task, network_bucket)
  )
