-- name: segment_counts
-- description: per side (edge | cloud) and level (segment, task x tier, task x bucket, task, release): per-device sums of every rate the gate tests, from the device-day rollup
-- params: release, window_start, window_end, weight_cap, by, segments
-- The unit of independence is the device: stage 1 sums each device's days (within each level) from
-- rollup_device_day, stage 2 sums those counts and their squares, from which pipeline/gate/stats.py gets each
-- ratio's cluster-robust variance (k = numerator, n = denominator: <k>, <k>_kk = sum k_i^2, <k>_kn = sum k_i n_i,
-- <n>, <n>_nn = sum n_i^2, <n>_devices = devices with n_i > 0). `*_over` counts values above the task's p95
-- budget (counted per row by the rollup). The window is whole days: [window_start, window_end) are midnights.
-- `cell` splits each segment by the device dimensions $by names (comma-separated, of soc, os_version,
-- mem_class_gb, npu_ready, model_id, app_version: pipeline drill); their values joined by chr(31) in that
-- order, '(null)' for a null. Only segments (level 0) are split; the other levels have cell NULL. The gate
-- passes '' (cell '' for every segment). $segments ('' = all) keeps only these task/tier/bucket keys
-- (comma-separated): a drill-down reads its segments' rows alone, and then only their level 0.
-- The estimand (gates/admission.yaml statistics.estimand) weighs each device's rows in the rate and comparison
-- gates: a device with n rows of which k count weighs w = least(n, $weight_cap) (1: every device once, the
-- mean of per-device rates; a huge cap: every row once) and contributes w * k / n. For those ratios
-- (rows: adopted, fallbacks; failures: detected; throttled_n: throttled; online_rows: online_adopted, the
-- device-level quality comparison over rows a cloud could have served) `<n>_w` and `<k>_w` are the
-- weighted sums, `<n>_nn`, `<k>_kk`, `<k>_kn` their squares and cross products, `<n>_ind` = sum w^2 / n
-- (the variance if rows were independent). The p95 budgets count requests (a p95 is a request quantile).
WITH picked AS (
    SELECT *, CASE WHEN route = 'cloud' THEN 'cloud' ELSE 'edge' END AS side,
           CASE WHEN network_bucket <> $bucket_offline THEN rows ELSE 0 END AS online_rows,
           CASE WHEN network_bucket <> $bucket_offline THEN adopted ELSE 0 END AS online_adopted,
           concat_ws(chr(31),
                     CASE WHEN list_contains(string_split($by, ','), 'soc') THEN coalesce(soc, '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'os_version') THEN coalesce(os_version, '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'mem_class_gb')
                          THEN coalesce(CAST(mem_class_gb AS VARCHAR), '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'npu_ready')
                          THEN coalesce(CAST(npu_ready AS VARCHAR), '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'model_id') THEN coalesce(model_id, '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'app_version') THEN coalesce(app_version, '(null)') END
           ) AS cell
    FROM rollup_device_day
    WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
      AND ($segments = '' OR list_contains(string_split($segments, ','),
                                           task || '/' || device_tier || '/' || network_bucket))
),
per_device AS (
    SELECT side, task, device_tier, network_bucket, cell,
           grouping(task) * 4 + grouping(device_tier) * 2 + grouping(network_bucket) AS level,
           sum(CAST(rows AS DOUBLE)) AS rows, sum(CAST(adopted AS DOUBLE)) AS adopted, sum(CAST(online_rows AS DOUBLE)) AS online_rows,
           sum(CAST(online_adopted AS DOUBLE)) AS online_adopted, sum(CAST(fallbacks AS DOUBLE)) AS fallbacks, sum(CAST(failures AS DOUBLE)) AS failures,
           sum(CAST(detected AS DOUBLE)) AS detected, sum(CAST(throttled_n AS DOUBLE)) AS throttled_n, sum(CAST(throttled AS DOUBLE)) AS throttled,
           sum(CAST(peak_n AS DOUBLE)) AS peak_n, sum(CAST(peak_over AS DOUBLE)) AS peak_over, sum(CAST(resident_n AS DOUBLE)) AS resident_n,
           sum(CAST(resident_over AS DOUBLE)) AS resident_over, sum(CAST(total_n AS DOUBLE)) AS total_n, sum(CAST(total_over AS DOUBLE)) AS total_over,
           sum(CAST(cold_n AS DOUBLE)) AS cold_n, sum(CAST(cold_over AS DOUBLE)) AS cold_over, sum(CAST(rise_n AS DOUBLE)) AS rise_n, sum(CAST(rise_over AS DOUBLE)) AS rise_over
    FROM picked
    GROUP BY GROUPING SETS ((side, task, device_tier, network_bucket, cell, device_id),
                            (side, task, device_tier, device_id), (side, task, network_bucket, device_id),
                            (side, task, device_id), (side, device_id))
),
weighted AS (
    SELECT *,
           CASE WHEN rows > 0 THEN least(rows, $weight_cap) ELSE 0 END AS rows_w,
           CASE WHEN failures > 0 THEN least(failures, $weight_cap) ELSE 0 END AS failures_w,
           CASE WHEN throttled_n > 0 THEN least(throttled_n, $weight_cap) ELSE 0 END AS throttled_n_w,
           CASE WHEN online_rows > 0 THEN least(online_rows, $weight_cap) ELSE 0 END AS online_rows_w
    FROM per_device
),
contributions AS (
    SELECT *,
           CASE WHEN rows > 0 THEN rows_w * adopted / rows ELSE 0 END AS adopted_w,
           CASE WHEN rows > 0 THEN rows_w * fallbacks / rows ELSE 0 END AS fallbacks_w,
           CASE WHEN failures > 0 THEN failures_w * detected / failures ELSE 0 END AS detected_w,
           CASE WHEN throttled_n > 0 THEN throttled_n_w * throttled / throttled_n ELSE 0 END AS throttled_w,
           CASE WHEN online_rows > 0 THEN online_rows_w * online_adopted / online_rows ELSE 0 END AS online_adopted_w
    FROM weighted
)
SELECT side, task, device_tier, network_bucket, cell, level,  -- 0 segment, 1 task x tier, 2 task x bucket, 3 task, 7 release
       count(*) AS devices,
       CAST(sum(rows) AS BIGINT) AS rows, sum(rows_w) AS rows_w, sum(rows_w * rows_w) AS rows_nn, sum(rows_w * rows_w / rows) AS rows_ind,
       CAST(sum(adopted) AS BIGINT) AS adopted, sum(adopted_w) AS adopted_w, sum(adopted_w * adopted_w) AS adopted_kk,
       sum(adopted_w * rows_w) AS adopted_kn,
       CAST(sum(online_rows) AS BIGINT) AS online_rows, sum(online_rows_w) AS online_rows_w,
       sum(online_rows_w * online_rows_w) AS online_rows_nn,
       sum(CASE WHEN online_rows > 0 THEN online_rows_w * online_rows_w / online_rows END) AS online_rows_ind,
       count(*) FILTER (WHERE online_rows > 0) AS online_rows_devices,
       CAST(sum(online_adopted) AS BIGINT) AS online_adopted, sum(online_adopted_w) AS online_adopted_w,
       sum(online_adopted_w * online_adopted_w) AS online_adopted_kk, sum(online_adopted_w * online_rows_w) AS online_adopted_kn,
       CAST(sum(fallbacks) AS BIGINT) AS fallbacks, sum(fallbacks_w) AS fallbacks_w, sum(fallbacks_w * fallbacks_w) AS fallbacks_kk,
       sum(fallbacks_w * rows_w) AS fallbacks_kn,
       CAST(sum(failures) AS BIGINT) AS failures, sum(failures_w) AS failures_w, sum(failures_w * failures_w) AS failures_nn,
       sum(CASE WHEN failures > 0 THEN failures_w * failures_w / failures END) AS failures_ind,
       count(*) FILTER (WHERE failures > 0) AS failures_devices,
       CAST(sum(detected) AS BIGINT) AS detected, sum(detected_w) AS detected_w, sum(detected_w * detected_w) AS detected_kk,
       sum(detected_w * failures_w) AS detected_kn,
       CAST(sum(throttled_n) AS BIGINT) AS throttled_n, sum(throttled_n_w) AS throttled_n_w, sum(throttled_n_w * throttled_n_w) AS throttled_n_nn,
       sum(CASE WHEN throttled_n > 0 THEN throttled_n_w * throttled_n_w / throttled_n END) AS throttled_n_ind,
       count(*) FILTER (WHERE throttled_n > 0) AS throttled_n_devices,
       CAST(sum(throttled) AS BIGINT) AS throttled, sum(throttled_w) AS throttled_w, sum(throttled_w * throttled_w) AS throttled_kk,
       sum(throttled_w * throttled_n_w) AS throttled_kn,
       CAST(sum(peak_n) AS BIGINT) AS peak_n, sum(peak_n * peak_n) AS peak_n_nn, count(*) FILTER (WHERE peak_n > 0) AS peak_n_devices,
       CAST(sum(peak_over) AS BIGINT) AS peak_over, sum(peak_over * peak_over) AS peak_over_kk, sum(peak_over * peak_n) AS peak_over_kn,
       CAST(sum(resident_n) AS BIGINT) AS resident_n, sum(resident_n * resident_n) AS resident_n_nn, count(*) FILTER (WHERE resident_n > 0) AS resident_n_devices,
       CAST(sum(resident_over) AS BIGINT) AS resident_over, sum(resident_over * resident_over) AS resident_over_kk,
       sum(resident_over * resident_n) AS resident_over_kn,
       CAST(sum(total_n) AS BIGINT) AS total_n, sum(total_n * total_n) AS total_n_nn, count(*) FILTER (WHERE total_n > 0) AS total_n_devices,
       CAST(sum(total_over) AS BIGINT) AS total_over, sum(total_over * total_over) AS total_over_kk,
       sum(total_over * total_n) AS total_over_kn,
       CAST(sum(cold_n) AS BIGINT) AS cold_n, sum(cold_n * cold_n) AS cold_n_nn, count(*) FILTER (WHERE cold_n > 0) AS cold_n_devices,
       CAST(sum(cold_over) AS BIGINT) AS cold_over, sum(cold_over * cold_over) AS cold_over_kk, sum(cold_over * cold_n) AS cold_over_kn,
       CAST(sum(rise_n) AS BIGINT) AS rise_n, sum(rise_n * rise_n) AS rise_n_nn, count(*) FILTER (WHERE rise_n > 0) AS rise_n_devices,
       CAST(sum(rise_over) AS BIGINT) AS rise_over, sum(rise_over * rise_over) AS rise_over_kk, sum(rise_over * rise_n) AS rise_over_kn
FROM contributions
GROUP BY side, task, device_tier, network_bucket, cell, level
