-- name: quarantine_day_checksum
-- description: rows and content checksum of the rows quarantined on one day, in the file
-- params: day (date)
SELECT count(*) AS rows, CAST(coalesce(sum(hash(*COLUMNS(*))), 0) AS VARCHAR) AS checksum
FROM quarantine
WHERE quarantined_at >= CAST($day AS DATE) AND quarantined_at < CAST($day AS DATE) + INTERVAL 1 DAY
