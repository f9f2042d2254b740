-- name: weak_latency
-- description: weak-network buckets, per side: per-device sums of ln(total_ms) and of its square (the intraclass correlation behind the p95's device-level variance), from the device-day rollup
-- params: release, window_start, window_end
-- Per segment (level 0) and per task over all tiers (level 2, the cloud baseline's fallback). Per device i:
-- n_i values, s_i = sum ln x, q_i = sum (ln x)^2; summed over devices with n_i^2 and s_i^2 / n_i, the one-way
-- ANOVA of ln(total_ms) by device that pipeline/gate/stats.py turns into the design effect of the share above
-- the p95 (stats.device_design_effect).
WITH picked AS (
    SELECT task, device_tier, device_id, total_n, log_total_sum, log_total_sq,
           CASE WHEN route = 'cloud' THEN 'cloud' ELSE 'edge' END AS side
    FROM rollup_device_day
    WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
      AND network_bucket = $bucket_weak AND total_n > 0
),
per_device AS (
    SELECT side, task, device_tier, grouping(device_tier) * 2 AS level, device_id,
           sum(total_n) AS n, sum(log_total_sum) AS s, sum(log_total_sq) AS q
    FROM picked
    GROUP BY GROUPING SETS ((side, task, device_tier, device_id), (side, task, device_id))
)
SELECT side, task, device_tier, $bucket_weak AS network_bucket, level, count(*) AS devices,
       sum(n) AS total_n, sum(n * n) AS total_n_nn, sum(s) AS log_sum, sum(q) AS log_sq, sum(s * s / n) AS log_between
FROM per_device
GROUP BY side, task, device_tier, level
