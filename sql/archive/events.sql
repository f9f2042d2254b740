-- name: events
-- description: raw events of the file and of the archive (all_events), optionally of one release and a span of days [since, until)
-- params: release (optional), since (optional, date), until (optional, date)
SELECT * FROM all_events
WHERE ($release IS NULL OR release = $release)
  AND ($since IS NULL OR day >= CAST($since AS DATE))
  AND ($until IS NULL OR day < CAST($until AS DATE))
ORDER BY event_time, event_id
