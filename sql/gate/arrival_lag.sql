-- name: arrival_lag
-- description: per network bucket, the log-bucket histogram of how long the release's rows of the window took to arrive (hours from event_time to the ingestion of their file), from the rollup's histograms
-- params: release, window_start, window_end
-- Weak and offline devices upload late, so the newest hours of a window under-represent their buckets;
-- gates/admission.yaml completeness_lag_hours holds back what is younger (docs/how-the-gate-decides.md).
SELECT network_bucket, bin, sum(n) AS n
FROM rollup_hist
WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
  AND figure = 'lag'
GROUP BY network_bucket, bin
ORDER BY network_bucket, bin
