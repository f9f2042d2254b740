-- name: temperature
-- description: report chart: a deterministic sample of the edge rows in the window, temperature rise against total_ms
-- params: release, window_start, window_end, points
-- The sample is the `points` rows with the smallest hash(event_id): the same rows on every run and machine,
-- and a top-N that stays cheap on millions of rows.
SELECT task, device_tier, network_bucket, total_ms, temp_rise_c, coalesce(throttled, false) AS throttled
FROM events_enriched
WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
  AND on_device AND total_ms IS NOT NULL AND temp_rise_c IS NOT NULL
ORDER BY hash(event_id), event_id
LIMIT $points
