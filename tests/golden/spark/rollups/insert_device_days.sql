WITH picked AS (
  SELECT
    *,
    NULLIF(ARRAY_POSITION(:budget_tasks, task), 0) AS budget_at
  FROM chunk_rows
), budgeted AS (
  SELECT
    *,
    COALESCE(TRY_ELEMENT_AT(:peak_budget, CAST(NULLIF(budget_at, 0) AS INT)), :peak_default) AS peak_budget,
    COALESCE(
      TRY_ELEMENT_AT(:resident_budget, CAST(NULLIF(budget_at, 0) AS INT)),
      :resident_default
    ) AS resident_budget,
    COALESCE(TRY_ELEMENT_AT(:total_budget, CAST(NULLIF(budget_at, 0) AS INT)), :total_default) AS total_budget,
    COALESCE(TRY_ELEMENT_AT(:cold_budget, CAST(NULLIF(budget_at, 0) AS INT)), :cold_default) AS cold_budget,
    COALESCE(TRY_ELEMENT_AT(:rise_budget, CAST(NULLIF(budget_at, 0) AS INT)), :rise_default) AS rise_budget,
    LN(GREATEST(total_ms, 1)) AS log_total
  FROM picked
), grouped AS (
  SELECT
    release,
    day,
    device_id,
    task,
    route,
    device_tier,
    network_bucket,
    MAX_BY(
      STRUCT(
        soc AS soc,
        os_version AS os_version,
        mem_class_gb AS mem_class_gb,
        npu_ready AS npu_ready,
        model_id AS model_id,
        app_version AS app_version
      ),
      event_time
    ) AS last_seen,
    MIN(event_time) AS first_at,
    MAX(event_time) AS last_at,
    COUNT(*) AS rows,
    COUNT(*) FILTER(WHERE
      adopted) AS adopted,
    COUNT(*) FILTER(WHERE
      fallback) AS fallbacks,
    COUNT(*) FILTER(WHERE
      failure) AS failures,
    COUNT(*) FILTER(WHERE
      failure AND detected_failure) AS detected,
    COUNT(throttled) AS throttled_n,
    COUNT(*) FILTER(WHERE
      throttled) AS throttled,
    COUNT(peak_mem_ratio) AS peak_n,
    COUNT(*) FILTER(WHERE
      peak_mem_ratio > peak_budget) AS peak_over,
    COUNT(resident_mem_ratio) AS resident_n,
    COUNT(*) FILTER(WHERE
      resident_mem_ratio > resident_budget) AS resident_over,
    COUNT(total_ms) AS total_n,
    COUNT(*) FILTER(WHERE
      total_ms > total_budget) AS total_over,
    COUNT(cold_start_ms) AS cold_n,
    COUNT(*) FILTER(WHERE
      cold_start_ms > cold_budget) AS cold_over,
    COUNT(temp_rise_c) AS rise_n,
    COUNT(*) FILTER(WHERE
      temp_rise_c > rise_budget) AS rise_over,
    SUM(total_ms) AS total_ms_sum,
    SUM(log_total) AS log_total_sum,
    SUM(log_total * log_total) AS log_total_sq,
    COALESCE(
      ARRAY_SORT(ARRAY_DISTINCT(COLLECT_LIST(error_code) FILTER(WHERE
        NOT error_code IS NULL))),
      ARRAY()
    ) AS error_codes
  FROM budgeted
  GROUP BY
    release,
    day,
    device_id,
    task,
    route,
    device_tier,
    network_bucket
)
SELECT
  release,
  day,
  device_id,
  task,
  route,
  device_tier,
  network_bucket,
  last_seen.soc,
  last_seen.os_version,
  last_seen.mem_class_gb,
  last_seen.npu_ready,
  last_seen.model_id,
  last_seen.app_version,
  first_at,
  last_at,
  rows,
  adopted,
  fallbacks,
  failures,
  detected,
  throttled_n,
  throttled,
  peak_n,
  peak_over,
  resident_n,
  resident_over,
  total_n,
  total_over,
  cold_n,
  cold_over,
  rise_n,
  rise_over,
  total_ms_sum,
  log_total_sum,
  log_total_sq,
  error_codes
FROM grouped
