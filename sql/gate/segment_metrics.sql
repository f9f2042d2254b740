-- name: segment_metrics
-- description: per side (edge | cloud) and level (segment, task x tier, task, release): the figures every gate reads
-- params: release, window_start, window_end, grid
WITH picked AS (
    SELECT *, CASE WHEN on_device THEN 'edge' ELSE 'cloud' END AS side
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
)
SELECT side, task, device_tier, network_bucket,
       grouping(task, device_tier, network_bucket) AS level,  -- 0 segment, 1 task x tier, 2 task x bucket, 3 task, 7 release
       count(*) AS rows,
       count(peak_mem_ratio) AS peak_n, quantile_cont(peak_mem_ratio, 0.95) AS peak_p95,
       quantile_disc(peak_mem_ratio, $grid) AS peak_grid,
       count(resident_mem_ratio) AS resident_n, quantile_cont(resident_mem_ratio, 0.95) AS resident_p95,
       quantile_disc(resident_mem_ratio, $grid) AS resident_grid,
       count(total_ms) AS total_n, quantile_cont(total_ms, 0.95) AS total_p95,
       quantile_disc(total_ms, $grid) AS total_grid,
       count(cold_start_ms) AS cold_n, quantile_cont(cold_start_ms, 0.95) AS cold_p95,
       quantile_disc(cold_start_ms, $grid) AS cold_grid,
       count(temp_rise_c) AS rise_n, quantile_cont(temp_rise_c, 0.95) AS rise_p95,
       quantile_disc(temp_rise_c, $grid) AS rise_grid,
       count(throttled) AS throttled_n, count(*) FILTER (WHERE throttled) AS throttled,
       count(*) FILTER (WHERE adopted) AS adopted,
       count(*) FILTER (WHERE fallback) AS fallbacks,
       count(*) FILTER (WHERE failure) AS failures,
       count(*) FILTER (WHERE failure AND detected_failure) AS detected
FROM picked
GROUP BY GROUPING SETS ((side, task, device_tier, network_bucket), (side, task, device_tier),
                        (side, task, network_bucket), (side, task), (side))
