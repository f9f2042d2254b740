-- name: releases
-- description: releases present, with their row counts and time span
SELECT release, count(*) AS rows, min(event_time) AS first_event, max(event_time) AS last_event
FROM events GROUP BY release ORDER BY release
