-- name: rolled_releases
-- description: releases with roll-ups but no raw events in the file (archived, or read from a snapshot), with their row counts and time span (beside gate/releases)
SELECT release, sum(rows) AS rows, CAST(min(day) AS TIMESTAMP) AS first_event,
       CAST(max(day) + INTERVAL 1 DAY AS TIMESTAMP) AS last_event
FROM rollup_daily
WHERE release NOT IN (SELECT DISTINCT release FROM events)
GROUP BY release
