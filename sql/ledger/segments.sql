-- name: ledger_segments
-- description: per task x tier x network bucket of a release in the window: the requests, tokens, seconds and exposures `pipeline ledger` accounts for
-- params: release, window_start, window_end
-- Sides as the gate has them (sql/gate/segment_counts.sql): on_device rows (edge, edge_with_cloud_check) are edge.
-- Avoided: edge rows not re-served by the cloud (auto_fallback) outside the offline bucket, where no cloud could serve.
SELECT task, device_tier, network_bucket,
       count(*) FILTER (WHERE on_device) AS edge_requests,
       count(*) FILTER (WHERE on_device AND route = 'edge_with_cloud_check') AS cloud_checks,
       count(*) FILTER (WHERE on_device AND network_bucket = $bucket_offline) AS offline_served,
       count(*) FILTER (WHERE on_device AND auto_fallback) AS fallbacks,
       coalesce(sum(prompt_tokens + output_tokens) FILTER (WHERE on_device AND auto_fallback), 0)::BIGINT
           AS fallback_tokens,
       count(*) FILTER (WHERE on_device AND NOT auto_fallback AND network_bucket <> $bucket_offline) AS avoided,
       coalesce(sum(prompt_tokens + output_tokens)
                FILTER (WHERE on_device AND NOT auto_fallback AND network_bucket <> $bucket_offline), 0)::BIGINT
           AS avoided_tokens,
       coalesce(sum(total_ms) FILTER (WHERE on_device), 0) / 1000.0 AS edge_seconds,
       count(throttled) FILTER (WHERE on_device) AS throttled_known,
       count(*) FILTER (WHERE on_device AND throttled) AS throttled,
       count(*) FILTER (WHERE on_device AND over_10s) AS over_10s,
       count(*) FILTER (WHERE on_device AND outcome = 'abandoned') AS edge_abandoned,
       count(*) FILTER (WHERE NOT on_device) AS cloud_requests,
       count(*) FILTER (WHERE NOT on_device AND outcome = 'abandoned') AS cloud_abandoned
FROM events_enriched
WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
GROUP BY task, device_tier, network_bucket
ORDER BY task, device_tier, network_bucket
