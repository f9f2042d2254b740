-- name: weak_latency
-- description: weak-network buckets, per side: the p95 of total_ms and the per-device sums of the values above it (the quantile's device-level variance)
-- params: release, window_start, window_end
-- Per segment (level 0) and per task over all tiers (level 2, the cloud baseline's fallback).
-- By Bahadur's representation Var(p95) = Var(share above the p95) / density^2: the share's
-- cluster-robust variance comes from these sums, the density from segment_quantiles' order statistics.
WITH picked AS (
    SELECT task, device_tier, device_id, total_ms, CASE WHEN on_device THEN 'edge' ELSE 'cloud' END AS side
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
      AND network_bucket = $bucket_weak AND total_ms IS NOT NULL
),
p95s AS (
    SELECT side, task, device_tier, grouping(device_tier) * 2 AS level, quantile_cont(total_ms, 0.95) AS p95
    FROM picked
    GROUP BY GROUPING SETS ((side, task, device_tier), (side, task))
),
per_device AS (
    SELECT q.side, q.task, q.device_tier, q.level, p.device_id,
           count(*) AS total_n, count(*) FILTER (WHERE p.total_ms > q.p95) AS above
    FROM p95s q JOIN picked p
      ON p.side = q.side AND p.task = q.task AND (q.level = 2 OR p.device_tier = q.device_tier)
    GROUP BY q.side, q.task, q.device_tier, q.level, p.device_id
)
SELECT side, task, device_tier, $bucket_weak AS network_bucket, level, count(*) AS devices,
       sum(total_n) AS total_n, sum(total_n * total_n) AS total_n_nn,
       sum(above) AS above, sum(above * above) AS above_kk, sum(above * total_n) AS above_kn
FROM per_device
GROUP BY side, task, device_tier, level
