-- name: derived
-- description: the derived fields of the contract (section 3) as the view events_enriched, and the rollup table
-- The thresholds come from gates/admission.yaml: writers store them in pipeline_settings;
-- a connection may override them for itself with SET VARIABLE (the gate does, for --config).
CREATE TABLE IF NOT EXISTS pipeline_settings (
    weak_rtt_ms            DOUBLE NOT NULL,
    weak_network_types     VARCHAR[] NOT NULL,
    daily_edge_seconds_cap DOUBLE NOT NULL,
    digest                 VARCHAR NOT NULL,
    updated_at             TIMESTAMP NOT NULL
);
CREATE OR REPLACE VIEW settings_in_effect AS
SELECT coalesce(getvariable('weak_rtt_ms'), s.weak_rtt_ms) AS weak_rtt_ms,
       coalesce(getvariable('weak_network_types'), s.weak_network_types) AS weak_network_types,
       coalesce(getvariable('daily_edge_seconds_cap'), s.daily_edge_seconds_cap) AS daily_edge_seconds_cap
FROM (SELECT *, 0 AS fallback_order FROM pipeline_settings
      UNION ALL SELECT 300, ['2g', '3g'], 600, '', NULL, 1) s  -- the defaults of gates/admission.yaml
ORDER BY fallback_order, updated_at DESC
LIMIT 1;
CREATE OR REPLACE VIEW events_enriched AS
SELECT e.*,
       CAST(e.event_time AS DATE) AS day,
       CASE WHEN e.network_type = 'offline' THEN 'offline'
            WHEN list_contains(s.weak_network_types, e.network_type) OR e.rtt_ms >= s.weak_rtt_ms THEN 'weak'
            ELSE 'normal' END AS network_bucket,
       e.temp_end_c - e.temp_start_c AS temp_rise_c,
       e.peak_mem_mb / (e.mem_class_gb * 1024.0) AS peak_mem_ratio,
       e.resident_mem_mb / (e.mem_class_gb * 1024.0) AS resident_mem_ratio,
       e.outcome IN ('edited', 'regenerated', 'undone') AS user_fallback,
       e.outcome IN ('edited', 'regenerated', 'undone') OR e.auto_fallback AS fallback,
       e.outcome = 'adopted' AS adopted,
       e.outcome IN ('edited', 'regenerated', 'undone') OR e.auto_fallback OR e.outcome = 'failed'
           OR e.error_code IS NOT NULL AS failure,
       e.auto_fallback OR e.error_code IS NOT NULL AS detected_failure,
       coalesce(e.error_code IN ('OOM', 'LMK_KILLED'), false) AS oom_or_lmk,
       e.total_ms > 10000 AS over_10s,
       e.prompt_tokens + e.output_tokens > 400 AS over_400_tokens,
       e.route <> 'cloud' AS on_device
FROM events e CROSS JOIN settings_in_effect s;
CREATE TABLE IF NOT EXISTS rollup_daily (
    release VARCHAR NOT NULL, day DATE NOT NULL, task VARCHAR NOT NULL, route VARCHAR NOT NULL,
    device_tier VARCHAR NOT NULL, network_bucket VARCHAR NOT NULL,
    rows BIGINT NOT NULL,
    total_ms_p50 DOUBLE, total_ms_p95 DOUBLE, total_ms_p99 DOUBLE, total_ms_stddev DOUBLE,
    ttft_ms_p50 DOUBLE, ttft_ms_p95 DOUBLE, ttft_ms_p99 DOUBLE, ttft_ms_stddev DOUBLE,
    peak_mem_ratio_p95 DOUBLE, resident_mem_ratio_p95 DOUBLE,
    temp_rise_c_p95 DOUBLE, throttled_share DOUBLE, cold_start_ms_p95 DOUBLE,
    adoption_rate DOUBLE, fallback_rate DOUBLE, auto_fallback_rate DOUBLE,
    failures BIGINT, failure_detectability DOUBLE, oom_lmk_share DOUBLE,
    over_10s_share DOUBLE, over_400_tokens_share DOUBLE,
    device_days BIGINT, edge_seconds_per_device_day_p95 DOUBLE, device_days_over_cap_share DOUBLE,
    updated_at TIMESTAMP NOT NULL
);
-- the sketch behind the window p95s the gate shows: per day and group, counts per log bucket of
-- each budgeted figure (sql/rollups/insert_hist_days.sql); days add up, so a window merges its days' partials
CREATE TABLE IF NOT EXISTS rollup_hist (
    release VARCHAR NOT NULL, day DATE NOT NULL, task VARCHAR NOT NULL, route VARCHAR NOT NULL,
    device_tier VARCHAR NOT NULL, network_bucket VARCHAR NOT NULL,
    figure VARCHAR NOT NULL,               -- peak | resident | total | cold | rise (the gate's figure names)
    bin BIGINT NOT NULL,                   -- log bucket (pipeline/warehouse/sketch.py)
    n BIGINT NOT NULL
);
-- the gate's input (sql/rollups/insert_device_days.sql): per release, day, device and group, the counts and sums of
-- every device-level test. A device's window totals are sums of its days, a segment's sums over its devices, so
-- the gate reads device-days, not events. `*_over` count values above the task's p95 budget at refresh time (the
-- budgets are in the settings digest: moving one rebuilds); the matrix attributes are the device's last of the day.
CREATE TABLE IF NOT EXISTS rollup_device_day (
    release VARCHAR NOT NULL, day DATE NOT NULL, device_id VARCHAR NOT NULL, task VARCHAR NOT NULL,
    route VARCHAR NOT NULL, device_tier VARCHAR NOT NULL, network_bucket VARCHAR NOT NULL,
    soc VARCHAR, os_version VARCHAR, mem_class_gb DOUBLE, npu_ready BOOLEAN, model_id VARCHAR, app_version VARCHAR,
    first_at TIMESTAMP NOT NULL, last_at TIMESTAMP NOT NULL,
    rows BIGINT NOT NULL, adopted BIGINT NOT NULL, fallbacks BIGINT NOT NULL, failures BIGINT NOT NULL,
    detected BIGINT NOT NULL, throttled_n BIGINT NOT NULL, throttled BIGINT NOT NULL,
    peak_n BIGINT NOT NULL, peak_over BIGINT NOT NULL, resident_n BIGINT NOT NULL, resident_over BIGINT NOT NULL,
    total_n BIGINT NOT NULL, total_over BIGINT NOT NULL, cold_n BIGINT NOT NULL, cold_over BIGINT NOT NULL,
    rise_n BIGINT NOT NULL, rise_over BIGINT NOT NULL,
    total_ms_sum DOUBLE,                   -- edge seconds of the device-day (daily_edge_seconds)
    log_total_sum DOUBLE, log_total_sq DOUBLE,  -- of ln(total_ms): the weak-network p95's design effect
    error_codes VARCHAR[] NOT NULL         -- the distinct error codes of the group's rows (kill_rate, error_days)
);
CREATE TABLE IF NOT EXISTS rollup_state (
    last_file_id INTEGER NOT NULL,
    settings_digest VARCHAR NOT NULL,
    refreshed_at TIMESTAMP NOT NULL
);
-- (release, day) pairs a replaced event left (ingest's order-independent dedupe): the next refresh recomputes them
CREATE TABLE IF NOT EXISTS rollup_stale_days (
    release VARCHAR NOT NULL,
    day     DATE NOT NULL
);
-- (release, day) pairs an intra-day look's batch was added to (sql/rollups/add_batch_*.sql): their rollup_daily has
-- waited since, and the next whole refresh recomputes them
CREATE TABLE IF NOT EXISTS rollup_provisional_days (
    release VARCHAR NOT NULL,
    day     DATE NOT NULL,
    PRIMARY KEY (release, day)
);
-- which refresh last recomputed each (release, day)'s roll-ups: a snapshot (pipeline/warehouse/snapshots.py) takes
-- the days whose version changed since the previous one
CREATE TABLE IF NOT EXISTS rollup_day_versions (
    release VARCHAR NOT NULL,
    day     DATE NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (release, day)
);
