SELECT
  e.*,
  CAST(e.event_time AS DATE) AS day,
  CASE
    WHEN e.network_type = 'offline'
    THEN 'offline'
    WHEN ARRAY_CONTAINS(s.weak_network_types, e.network_type) OR e.rtt_ms >= s.weak_rtt_ms
    THEN 'weak'
    ELSE 'normal'
  END AS network_bucket,
  e.temp_end_c - e.temp_start_c AS temp_rise_c,
  e.peak_mem_mb / (
    e.mem_class_gb * 1024.0
  ) AS peak_mem_ratio,
  e.resident_mem_mb / (
    e.mem_class_gb * 1024.0
  ) AS resident_mem_ratio,
  e.outcome IN ('edited', 'regenerated', 'undone') AS user_fallback,
  e.outcome IN ('edited', 'regenerated', 'undone') OR e.auto_fallback AS fallback,
  e.outcome = 'adopted' AS adopted,
  e.outcome IN ('edited', 'regenerated', 'undone')
  OR e.auto_fallback
  OR e.outcome = 'failed'
  OR NOT e.error_code IS NULL AS failure,
  e.auto_fallback OR NOT e.error_code IS NULL AS detected_failure,
  COALESCE(e.error_code IN ('OOM', 'LMK_KILLED'), FALSE) AS oom_or_lmk,
  e.total_ms > 10000 AS over_10s,
  e.prompt_tokens + e.output_tokens > 400 AS over_400_tokens,
  e.route <> 'cloud' AS on_device
FROM events AS e
CROSS JOIN settings_in_effect AS s
