-- name: segment_counts
-- description: per side (edge | cloud) and level (segment, task x tier, task x bucket, task, release): counts the rate gates read
-- params: release, window_start, window_end
WITH picked AS (
    SELECT *, CASE WHEN on_device THEN 'edge' ELSE 'cloud' END AS side
    FROM events_enriched
    WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
)
SELECT side, task, device_tier, network_bucket,
       grouping(task, device_tier, network_bucket) AS level,  -- 0 segment, 1 task x tier, 2 task x bucket, 3 task, 7 release
       count(*) AS rows,
       count(peak_mem_ratio) AS peak_n, count(resident_mem_ratio) AS resident_n, count(total_ms) AS total_n,
       count(cold_start_ms) AS cold_n, count(temp_rise_c) AS rise_n,
       count(throttled) AS throttled_n, count(*) FILTER (WHERE throttled) AS throttled,
       count(*) FILTER (WHERE adopted) AS adopted,
       count(*) FILTER (WHERE fallback) AS fallbacks,
       count(*) FILTER (WHERE failure) AS failures,
       count(*) FILTER (WHERE failure AND detected_failure) AS detected
FROM picked
GROUP BY GROUPING SETS ((side, task, device_tier, network_bucket), (side, task, device_tier),
                        (side, task, network_bucket), (side, task), (side))
