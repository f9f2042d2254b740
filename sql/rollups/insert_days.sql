-- name: insert_days
-- description: recompute the daily rollup (release x day x task x route x tier x bucket) of the rows of chunk_rows
-- params: updated_at
INSERT INTO rollup_daily
-- picked is read by three parts below: NOT MATERIALIZED streams it to each instead of holding every
-- column of the chunk's rows in memory (the quantiles keep their own inputs)
WITH picked AS NOT MATERIALIZED (SELECT * FROM chunk_rows),
-- the cap is on a device's whole day of edge inference (all tasks and networks); a group counts
-- the device-days that had a request in it, each with the device's total for that day
device_day_totals AS (
    SELECT release, day, device_id, sum(total_ms) / 1000.0 AS edge_seconds
    FROM picked WHERE on_device GROUP BY ALL
),
group_device_days AS (
    SELECT DISTINCT release, day, task, route, device_tier, network_bucket, device_id FROM picked WHERE on_device
),
per_device AS (
    SELECT g.release, g.day, g.task, g.route, g.device_tier, g.network_bucket,
           count(*) AS device_days,
           quantile_cont(t.edge_seconds, 0.95) AS edge_seconds_per_device_day_p95,
           avg(CAST(t.edge_seconds > s.daily_edge_seconds_cap AS DOUBLE)) AS device_days_over_cap_share
    FROM group_device_days g JOIN device_day_totals t USING (release, day, device_id)
    CROSS JOIN settings_in_effect s
    GROUP BY ALL
),
per_group AS (
    SELECT release, day, task, route, device_tier, network_bucket,
           count(*) AS rows,
           -- one sort of a group's values serves its three quantiles
           quantile_cont(total_ms, [0.50, 0.95, 0.99]) AS total_ms_q,
           stddev_samp(total_ms) AS total_ms_stddev,
           quantile_cont(ttft_ms, [0.50, 0.95, 0.99]) AS ttft_ms_q,
           stddev_samp(ttft_ms) AS ttft_ms_stddev,
           quantile_cont(peak_mem_ratio, 0.95) AS peak_mem_ratio_p95,
           quantile_cont(resident_mem_ratio, 0.95) AS resident_mem_ratio_p95,
           quantile_cont(temp_rise_c, 0.95) AS temp_rise_c_p95,
           avg(CAST(throttled AS DOUBLE)) AS throttled_share,
           quantile_cont(cold_start_ms, 0.95) AS cold_start_ms_p95,
           avg(CAST(adopted AS DOUBLE)) AS adoption_rate,
           avg(CAST(fallback AS DOUBLE)) AS fallback_rate,
           avg(CAST(auto_fallback AS DOUBLE)) AS auto_fallback_rate,
           count(*) FILTER (WHERE failure) AS failures,
           CAST(count(*) FILTER (WHERE failure AND detected_failure) AS DOUBLE)
               / nullif(count(*) FILTER (WHERE failure), 0) AS failure_detectability,
           avg(CAST(oom_or_lmk AS DOUBLE)) AS oom_lmk_share,
           avg(CAST(over_10s AS DOUBLE)) AS over_10s_share,
           avg(CAST(over_400_tokens AS DOUBLE)) AS over_400_tokens_share
    FROM picked
    GROUP BY ALL
)
SELECT g.release, g.day, g.task, g.route, g.device_tier, g.network_bucket, g.rows,
       g.total_ms_q[1] AS total_ms_p50, g.total_ms_q[2] AS total_ms_p95, g.total_ms_q[3] AS total_ms_p99,
       g.total_ms_stddev,
       g.ttft_ms_q[1] AS ttft_ms_p50, g.ttft_ms_q[2] AS ttft_ms_p95, g.ttft_ms_q[3] AS ttft_ms_p99,
       g.* EXCLUDE (release, day, task, route, device_tier, network_bucket, rows, total_ms_q, total_ms_stddev,
                    ttft_ms_q),
       d.device_days, d.edge_seconds_per_device_day_p95, d.device_days_over_cap_share,
       CAST($updated_at AS TIMESTAMP) AS updated_at
FROM per_group g
LEFT JOIN per_device d USING (release, day, task, route, device_tier, network_bucket)
