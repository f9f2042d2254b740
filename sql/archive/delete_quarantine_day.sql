-- name: delete_quarantine_day
-- description: the rows quarantined on one day leave the file (in the transaction that records the day as archived); returns the count
-- params: day (date)
DELETE FROM quarantine
WHERE quarantined_at >= CAST($day AS DATE) AND quarantined_at < CAST($day AS DATE) + INTERVAL 1 DAY
