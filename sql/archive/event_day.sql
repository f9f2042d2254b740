-- name: event_day
-- description: one (release, day)'s raw events as the archive stores them: every column, and day (a partition column)
-- params: release, day (date)
SELECT *, CAST(event_time AS DATE) AS day
FROM events
WHERE release = $release AND event_time >= CAST($day AS DATE) AND event_time < CAST($day AS DATE) + INTERVAL 1 DAY
ORDER BY event_id
