-- name: insert_device_days
-- description: recompute the device-day rollup (release x day x device x task x route x tier x bucket) of the rows of chunk_rows: the counts and sums the gate's device-level tests read
-- params: budget_tasks, peak_budget, resident_budget, total_budget, cold_budget, rise_budget, peak_default, resident_default, total_default, cold_default, rise_default
-- `*_over` counts values above the task's p95 budget ($budget_tasks names the tasks with their own budget, the
-- *_budget lists hold them in the same order, as in sql/gate/segment_counts.sql). The matrix attributes are the
-- device's at its last request of the group that day: one arg_max of them all (six arg_max calls cost 4 s more at
-- 5M events, and each skipped the rows where its own column was NULL).
INSERT INTO rollup_device_day
WITH picked AS (
    SELECT *, list_position($budget_tasks, task) AS budget_at FROM chunk_rows
),
budgeted AS (
    SELECT *,
           coalesce(list_extract($peak_budget, budget_at), $peak_default) AS peak_budget,
           coalesce(list_extract($resident_budget, budget_at), $resident_default) AS resident_budget,
           coalesce(list_extract($total_budget, budget_at), $total_default) AS total_budget,
           coalesce(list_extract($cold_budget, budget_at), $cold_default) AS cold_budget,
           coalesce(list_extract($rise_budget, budget_at), $rise_default) AS rise_budget,
           ln(greatest(total_ms, 1)) AS log_total
    FROM picked
),
grouped AS (
    SELECT release, day, device_id, task, route, device_tier, network_bucket,
       arg_max({'soc': soc, 'os_version': os_version, 'mem_class_gb': mem_class_gb, 'npu_ready': npu_ready,
                'model_id': model_id, 'app_version': app_version}, event_time) AS last_seen,
       min(event_time) AS first_at, max(event_time) AS last_at,
       count(*) AS rows,
       count(*) FILTER (WHERE adopted) AS adopted,
       count(*) FILTER (WHERE fallback) AS fallbacks,
       count(*) FILTER (WHERE failure) AS failures,
       count(*) FILTER (WHERE failure AND detected_failure) AS detected,
       count(throttled) AS throttled_n, count(*) FILTER (WHERE throttled) AS throttled,
       count(peak_mem_ratio) AS peak_n, count(*) FILTER (WHERE peak_mem_ratio > peak_budget) AS peak_over,
       count(resident_mem_ratio) AS resident_n,
       count(*) FILTER (WHERE resident_mem_ratio > resident_budget) AS resident_over,
       count(total_ms) AS total_n, count(*) FILTER (WHERE total_ms > total_budget) AS total_over,
       count(cold_start_ms) AS cold_n, count(*) FILTER (WHERE cold_start_ms > cold_budget) AS cold_over,
       count(temp_rise_c) AS rise_n, count(*) FILTER (WHERE temp_rise_c > rise_budget) AS rise_over,
       sum(total_ms) AS total_ms_sum,
       sum(log_total) AS log_total_sum, sum(log_total * log_total) AS log_total_sq,
       coalesce(list_sort(list_distinct(list(error_code) FILTER (WHERE error_code IS NOT NULL))), []) AS error_codes
FROM budgeted
GROUP BY release, day, device_id, task, route, device_tier, network_bucket
)
SELECT release, day, device_id, task, route, device_tier, network_bucket,
       last_seen.soc, last_seen.os_version, last_seen.mem_class_gb, last_seen.npu_ready, last_seen.model_id,
       last_seen.app_version, first_at, last_at, rows, adopted, fallbacks, failures, detected, throttled_n, throttled,
       peak_n, peak_over, resident_n, resident_over, total_n, total_over, cold_n, cold_over, rise_n, rise_over,
       total_ms_sum, log_total_sum, log_total_sq, error_codes
FROM grouped
