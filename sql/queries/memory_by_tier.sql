-- name: memory_by_tier
-- description: p50/p95 of peak and resident memory (MB and share of RAM) per device tier and RAM class, edge rows
-- params: release
SELECT device_tier, mem_class_gb, count(*) AS rows,
       round(quantile_cont(peak_mem_mb, 0.95)) AS peak_mb_p95,
       round(quantile_cont(peak_mem_ratio, 0.95), 3) AS peak_ratio_p95,
       round(quantile_cont(resident_mem_mb, 0.95)) AS resident_mb_p95,
       round(quantile_cont(resident_mem_ratio, 0.95), 3) AS resident_ratio_p95,
       round(avg(CAST(oom_or_lmk AS DOUBLE)), 4) AS oom_lmk_share
FROM all_events_enriched
WHERE release = $release AND on_device
GROUP BY ALL
ORDER BY mem_class_gb, device_tier
