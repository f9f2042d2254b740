-- name: first_seen
-- description: the release's first event time in the window (how many days of inflow the window holds)
-- params: release, window_start, window_end
SELECT min(event_time) AS first_seen
FROM events_enriched
WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
