-- name: scale_to_budget
-- description: backtest injection: scale one figure of the edge rows per segment so that its p95 sits at $factor x the segment's budget
-- params: factor, figure, budget_tasks, peak_budget, total_budget, peak_default, total_default
-- Runs on pipeline backtest's in-memory copy only. $figure is 'total' (total_ms and ttft_ms) or
-- 'memory' (peak_mem_mb and resident_mem_mb, against the peak budget: both grow by the same factor).
WITH seg AS (
    SELECT task, device_tier, network_bucket,
           CASE WHEN $figure = 'total' THEN quantile_cont(total_ms, 0.95) ELSE quantile_cont(peak_mem_ratio, 0.95) END
               AS p95,
           CASE WHEN $figure = 'total'
                THEN coalesce(list_extract($total_budget, list_position($budget_tasks, task)), $total_default)
                ELSE coalesce(list_extract($peak_budget, list_position($budget_tasks, task)), $peak_default) END
               AS budget
    FROM events_enriched
    WHERE on_device
    GROUP BY task, device_tier, network_bucket
),
scaled AS (
    SELECT e.event_id, $factor * s.budget / s.p95 AS f
    FROM events_enriched e JOIN seg s USING (task, device_tier, network_bucket)
    WHERE e.on_device AND s.p95 > 0
)
UPDATE events SET
    total_ms = CASE WHEN $figure = 'total' THEN total_ms * scaled.f ELSE total_ms END,
    ttft_ms = CASE WHEN $figure = 'total' THEN ttft_ms * scaled.f ELSE ttft_ms END,
    peak_mem_mb = CASE WHEN $figure = 'memory' THEN peak_mem_mb * scaled.f ELSE peak_mem_mb END,
    resident_mem_mb = CASE WHEN $figure = 'memory' THEN resident_mem_mb * scaled.f ELSE resident_mem_mb END
FROM scaled
WHERE events.event_id = scaled.event_id
