-- name: latency
-- description: report chart: p50/p95/p99 of total_ms per task and network bucket, edge beside cloud, in the gate's window
-- params: release, window_start, window_end
-- Sides as the gate has them (sql/gate/segment_counts.sql): on_device rows are edge, the rest cloud.
SELECT task, network_bucket,
       CASE WHEN on_device THEN 'edge' ELSE 'cloud' END AS side,
       count(*) AS rows,
       count(total_ms) AS total_n,
       quantile_cont(total_ms, [0.5, 0.95, 0.99]) AS total_ms_q
FROM events_enriched
WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
GROUP BY ALL
ORDER BY ALL
