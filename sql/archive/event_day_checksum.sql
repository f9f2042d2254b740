-- name: event_day_checksum
-- description: rows and content checksum of one (release, day) of raw events in the file
-- params: release, day (date)
-- The checksum sums DuckDB's hash of every column of each row (archived_event_day_checksum.sql hashes the same
-- columns in the same order as the archive reads them back).
SELECT count(*) AS rows, CAST(coalesce(sum(hash(*COLUMNS(*))), 0) AS VARCHAR) AS checksum
FROM events
WHERE release = $release AND event_time >= CAST($day AS DATE) AND event_time < CAST($day AS DATE) + INTERVAL 1 DAY
