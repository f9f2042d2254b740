-- name: ledger_field
-- description: what the field measured for one task on the candidate's target tiers in the window: p95s of latency, memory and heat, and adoption edge vs cloud
-- params: release, window_start, window_end, task, tiers
-- $tiers is the list of the candidate's target tiers. One row per tier (level 0) and one over all of them (level 1).
SELECT device_tier,
       grouping(device_tier) AS level,
       count(*) FILTER (WHERE on_device) AS edge_rows,
       quantile_cont(total_ms, 0.95) FILTER (WHERE on_device) AS total_ms_p95,
       quantile_cont(peak_mem_mb, 0.95) FILTER (WHERE on_device) AS peak_mem_mb_p95,
       quantile_cont(resident_mem_mb, 0.95) FILTER (WHERE on_device) AS resident_mem_mb_p95,
       quantile_cont(temp_rise_c, 0.95) FILTER (WHERE on_device) AS temp_rise_c_p95,
       count(throttled) FILTER (WHERE on_device) AS throttled_known,
       count(*) FILTER (WHERE on_device AND throttled) AS throttled,
       count(*) FILTER (WHERE on_device AND adopted) AS edge_adopted,
       count(*) FILTER (WHERE NOT on_device) AS cloud_rows,
       count(*) FILTER (WHERE NOT on_device AND adopted) AS cloud_adopted
FROM events_enriched
WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
  AND task = $task AND list_contains($tiers, device_tier)
GROUP BY GROUPING SETS ((device_tier), ())
ORDER BY level, device_tier
