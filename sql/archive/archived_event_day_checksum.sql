-- name: archived_event_day_checksum
-- description: rows and content checksum of one (release, day) as the archive's events table holds it
-- params: release, day (date)
SELECT count(*) AS rows, CAST(coalesce(sum(hash(*COLUMNS(* EXCLUDE (day)))), 0) AS VARCHAR) AS checksum
FROM archived_events
WHERE release = $release AND day = CAST($day AS DATE)
