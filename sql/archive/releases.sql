-- name: releases
-- description: releases whose raw events are only in the archive, with their row counts and time span (beside gate/releases)
SELECT release, sum(rows) AS rows, CAST(min(day) AS TIMESTAMP) AS first_event,
       CAST(max(day) + INTERVAL 1 DAY AS TIMESTAMP) AS last_event
FROM archived_days
WHERE kind = 'events' AND release NOT IN (SELECT DISTINCT release FROM events)
GROUP BY release
