-- name: due_quarantine_days
-- description: the days quarantined rows were quarantined on, older than the archive's cutoff, with their rows, oldest first
-- params: cutoff (date)
SELECT '' AS release, CAST(quarantined_at AS DATE) AS day, count(*) AS rows
FROM quarantine
WHERE quarantined_at < CAST($cutoff AS DATE)
GROUP BY ALL
ORDER BY day
