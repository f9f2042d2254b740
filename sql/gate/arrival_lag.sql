-- name: arrival_lag
-- description: per network bucket, how long the release's rows of the window took to arrive: hours from event_time to the ingestion of their file (median and p95)
-- params: release, window_start, window_end
-- Weak and offline devices upload late, so the newest hours of a window under-represent their buckets;
-- gates/admission.yaml completeness_lag_hours holds back what is younger (docs/how-the-gate-decides.md).
SELECT e.network_bucket, count(*) AS rows,
       quantile_cont(epoch(f.ingested_at - e.event_time) / 3600.0, 0.5) AS median_hours,
       quantile_cont(epoch(f.ingested_at - e.event_time) / 3600.0, 0.95) AS p95_hours
FROM events_enriched e JOIN files f USING (file_id)
WHERE e.release = $release AND e.event_time >= $window_start AND e.event_time < $window_end
GROUP BY e.network_bucket
ORDER BY e.network_bucket
