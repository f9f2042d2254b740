-- name: segment_quantiles
-- description: per side and segment (and task x bucket, the weak-network baseline): p95 and the quantile grid of each budgeted figure
-- params: release, window_start, window_end, fractions
-- $fractions is [0.95] followed by stats.QUANTILE_GRID: one sort per figure gives the p95 and its interval.
WITH picked AS (
    SELECT *, CASE WHEN on_device THEN 'edge' ELSE 'cloud' END AS side
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
)
SELECT side, task, device_tier, network_bucket,
       grouping(task, device_tier, network_bucket) AS level,
       quantile_cont(peak_mem_ratio, $fractions) AS peak_q,
       quantile_cont(resident_mem_ratio, $fractions) AS resident_q,
       quantile_cont(total_ms, $fractions) AS total_q,
       quantile_cont(cold_start_ms, $fractions) AS cold_q,
       quantile_cont(temp_rise_c, $fractions) AS rise_q
FROM picked
GROUP BY GROUPING SETS ((side, task, device_tier, network_bucket), (side, task, network_bucket))
