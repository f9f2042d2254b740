-- name: quarantine_day
-- description: the rows quarantined on one day, as the archive stores them: every column, and quarantined_day (the partition column)
-- params: day (date)
SELECT *, CAST(quarantined_at AS DATE) AS quarantined_day
FROM quarantine
WHERE quarantined_at >= CAST($day AS DATE) AND quarantined_at < CAST($day AS DATE) + INTERVAL 1 DAY
ORDER BY file_id, row_in_file
