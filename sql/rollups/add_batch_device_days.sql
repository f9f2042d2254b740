-- name: add_batch_device_days
-- description: add an intra-day batch's device-day rows (temp table batch_device_day, as rollup_device_day) to rollup_device_day: counts and sums add up, the matrix attributes are the later row's, the error codes are the union
-- As sql/rollups/insert_device_days.sql would have computed them over both rows' events, but for the sums' rounding
-- (a floating-point sum in another order): the next whole refresh recomputes the day (rollup_provisional_days).
MERGE INTO rollup_device_day r USING batch_device_day b
ON r.release = b.release AND r.day = b.day AND r.device_id = b.device_id AND r.task = b.task AND r.route = b.route
   AND r.device_tier = b.device_tier AND r.network_bucket = b.network_bucket
WHEN MATCHED THEN UPDATE SET
    soc = CASE WHEN b.last_at >= r.last_at THEN b.soc ELSE r.soc END,
    os_version = CASE WHEN b.last_at >= r.last_at THEN b.os_version ELSE r.os_version END,
    mem_class_gb = CASE WHEN b.last_at >= r.last_at THEN b.mem_class_gb ELSE r.mem_class_gb END,
    npu_ready = CASE WHEN b.last_at >= r.last_at THEN b.npu_ready ELSE r.npu_ready END,
    model_id = CASE WHEN b.last_at >= r.last_at THEN b.model_id ELSE r.model_id END,
    app_version = CASE WHEN b.last_at >= r.last_at THEN b.app_version ELSE r.app_version END,
    first_at = least(r.first_at, b.first_at), last_at = greatest(r.last_at, b.last_at),
    rows = r.rows + b.rows, adopted = r.adopted + b.adopted, fallbacks = r.fallbacks + b.fallbacks,
    failures = r.failures + b.failures, detected = r.detected + b.detected,
    throttled_n = r.throttled_n + b.throttled_n, throttled = r.throttled + b.throttled,
    peak_n = r.peak_n + b.peak_n, peak_over = r.peak_over + b.peak_over,
    resident_n = r.resident_n + b.resident_n, resident_over = r.resident_over + b.resident_over,
    total_n = r.total_n + b.total_n, total_over = r.total_over + b.total_over,
    cold_n = r.cold_n + b.cold_n, cold_over = r.cold_over + b.cold_over,
    rise_n = r.rise_n + b.rise_n, rise_over = r.rise_over + b.rise_over,
    total_ms_sum = coalesce(r.total_ms_sum + b.total_ms_sum, r.total_ms_sum, b.total_ms_sum),
    log_total_sum = coalesce(r.log_total_sum + b.log_total_sum, r.log_total_sum, b.log_total_sum),
    log_total_sq = coalesce(r.log_total_sq + b.log_total_sq, r.log_total_sq, b.log_total_sq),
    error_codes = list_sort(list_distinct(list_concat(r.error_codes, b.error_codes)))
WHEN NOT MATCHED THEN INSERT
