-- name: edge_vs_cloud_latency
-- description: p50/p95/p99 of total_ms per network bucket, edge beside cloud, with the edge-minus-cloud gap
-- params: release, task (optional), since (optional, date)
WITH q AS (
    SELECT network_bucket, on_device,
           count(*) AS rows,
           quantile_cont(total_ms, [0.5, 0.95, 0.99]) AS p
    FROM all_events_enriched
    WHERE release = $release AND ($task IS NULL OR task = $task)
      AND ($since IS NULL OR event_time >= CAST($since AS DATE))
    GROUP BY ALL
)
SELECT e.network_bucket,
       e.rows AS edge_rows, c.rows AS cloud_rows,
       round(e.p[1]) AS edge_p50_ms, round(c.p[1]) AS cloud_p50_ms,
       round(e.p[2]) AS edge_p95_ms, round(c.p[2]) AS cloud_p95_ms,
       round(e.p[3]) AS edge_p99_ms, round(c.p[3]) AS cloud_p99_ms,
       round(e.p[2] - c.p[2]) AS p95_gap_ms
FROM q e LEFT JOIN q c ON c.network_bucket = e.network_bucket AND NOT c.on_device
WHERE e.on_device
ORDER BY e.network_bucket
