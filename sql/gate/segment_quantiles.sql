-- name: segment_quantiles
-- description: per side and segment (and task x bucket, the weak-network baseline): p95 and the order statistics of each budgeted figure
-- params: release, window_start, window_end, fractions
-- The p95 itself is quantile_cont (what the budget reads); $fractions (stats.QUANTILE_GRID) go to
-- quantile_disc, true order statistics (the ceil(f * n)-th smallest value), from which the exact
-- distribution-free interval and the density at the p95 are read.
WITH picked AS (
    SELECT *, CASE WHEN on_device THEN 'edge' ELSE 'cloud' END AS side
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
)
SELECT side, task, device_tier, network_bucket,
       grouping(task) * 4 + grouping(device_tier) * 2 + grouping(network_bucket) AS level,
       quantile_cont(peak_mem_ratio, 0.95) AS peak_p95, quantile_disc(peak_mem_ratio, $fractions) AS peak_grid,
       quantile_cont(resident_mem_ratio, 0.95) AS resident_p95,
       quantile_disc(resident_mem_ratio, $fractions) AS resident_grid,
       quantile_cont(total_ms, 0.95) AS total_p95, quantile_disc(total_ms, $fractions) AS total_grid,
       quantile_cont(cold_start_ms, 0.95) AS cold_p95, quantile_disc(cold_start_ms, $fractions) AS cold_grid,
       quantile_cont(temp_rise_c, 0.95) AS rise_p95, quantile_disc(temp_rise_c, $fractions) AS rise_grid
FROM picked
GROUP BY GROUPING SETS ((side, task, device_tier, network_bucket), (side, task, network_bucket))
