-- name: archived_quarantine_day_checksum
-- description: rows and content checksum of the rows quarantined on one day, as the archive's quarantine table holds them
-- params: day (date)
SELECT count(*) AS rows, CAST(coalesce(sum(hash(*COLUMNS(* EXCLUDE (quarantined_day)))), 0) AS VARCHAR) AS checksum
FROM archived_quarantine
WHERE quarantined_day = CAST($day AS DATE)
