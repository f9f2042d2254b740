-- name: delete_event_day
-- description: one (release, day)'s raw events leave the file (in the transaction that records the day as archived); returns the count
-- params: release, day (date)
DELETE FROM events
WHERE release = $release AND event_time >= CAST($day AS DATE) AND event_time < CAST($day AS DATE) + INTERVAL 1 DAY
