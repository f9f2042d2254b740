-- name: window_days
-- description: the release's days of a window as chunk_days, for rolling up the window's events on the fly (the gate's source "events")
-- params: release, window_start, window_end
CREATE OR REPLACE TEMP TABLE chunk_days AS
SELECT DISTINCT release, CAST(event_time AS DATE) AS day
FROM events
WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
