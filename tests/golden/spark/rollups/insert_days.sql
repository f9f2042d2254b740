WITH picked AS (
  SELECT
    *
  FROM chunk_rows
), device_day_totals AS (
  SELECT
    release,
    day,
    device_id,
    SUM(total_ms) / 1000.0 AS edge_seconds
  FROM picked
  WHERE
    on_device
  GROUP BY ALL
), group_device_days AS (
  SELECT DISTINCT
    release,
    day,
    task,
    route,
    device_tier,
    network_bucket,
    device_id
  FROM picked
  WHERE
    on_device
), per_device AS (
  SELECT
    g.release,
    g.day,
    g.task,
    g.route,
    g.device_tier,
    g.network_bucket,
    COUNT(*) AS device_days,
    PERCENTILE(t.edge_seconds, 0.95) AS edge_seconds_per_device_day_p95,
    AVG(CAST(t.edge_seconds > s.daily_edge_seconds_cap AS DOUBLE)) AS device_days_over_cap_share
  FROM group_device_days AS g
  JOIN device_day_totals AS t
    USING (release, day, device_id)
  CROSS JOIN settings_in_effect AS s
  GROUP BY ALL
), per_group AS (
  SELECT
    release,
    day,
    task,
    route,
    device_tier,
    network_bucket,
    COUNT(*) AS rows,
    PERCENTILE(total_ms, ARRAY(0.50, 0.95, 0.99)) AS total_ms_q,
    STDDEV_SAMP(total_ms) AS total_ms_stddev,
    PERCENTILE(ttft_ms, ARRAY(0.50, 0.95, 0.99)) AS ttft_ms_q,
    STDDEV_SAMP(ttft_ms) AS ttft_ms_stddev,
    PERCENTILE(peak_mem_ratio, 0.95) AS peak_mem_ratio_p95,
    PERCENTILE(resident_mem_ratio, 0.95) AS resident_mem_ratio_p95,
    PERCENTILE(temp_rise_c, 0.95) AS temp_rise_c_p95,
    AVG(CAST(throttled AS DOUBLE)) AS throttled_share,
    PERCENTILE(cold_start_ms, 0.95) AS cold_start_ms_p95,
    AVG(CAST(adopted AS DOUBLE)) AS adoption_rate,
    AVG(CAST(fallback AS DOUBLE)) AS fallback_rate,
    AVG(CAST(auto_fallback AS DOUBLE)) AS auto_fallback_rate,
    COUNT(*) FILTER(WHERE
      failure) AS failures,
    CAST(COUNT(*) FILTER(WHERE
      failure AND detected_failure) AS DOUBLE) / NULLIF(COUNT(*) FILTER(WHERE
      failure), 0) AS failure_detectability,
    AVG(CAST(oom_or_lmk AS DOUBLE)) AS oom_lmk_share,
    AVG(CAST(over_10s AS DOUBLE)) AS over_10s_share,
    AVG(CAST(over_400_tokens AS DOUBLE)) AS over_400_tokens_share
  FROM picked
  GROUP BY ALL
)
SELECT
  g.release,
  g.day,
  g.task,
  g.route,
  g.device_tier,
  g.network_bucket,
  g.rows,
  g.total_ms_q[0] AS total_ms_p50,
  g.total_ms_q[1] AS total_ms_p95,
  g.total_ms_q[2] AS total_ms_p99,
  g.total_ms_stddev,
  g.ttft_ms_q[0] AS ttft_ms_p50,
  g.ttft_ms_q[1] AS ttft_ms_p95,
  g.ttft_ms_q[2] AS ttft_ms_p99,
  g.*
  EXCEPT (release, day, task, route, device_tier, network_bucket, rows, total_ms_q, total_ms_stddev, ttft_ms_q),
  d.device_days,
  d.edge_seconds_per_device_day_p95,
  d.device_days_over_cap_share,
  CAST(:updated_at AS TIMESTAMP_NTZ) AS updated_at
FROM per_group AS g
LEFT JOIN per_device AS d
  USING (release, day, task, route, device_tier, network_bucket)
