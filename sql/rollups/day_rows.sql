-- name: day_rows
-- description: the stored rows of each touched day, in (release, day) order: the rollup is recomputed a bounded number of rows at a time
WITH stored AS (
    SELECT release, CAST(event_time AS DATE) AS day FROM events
    WHERE event_time >= (SELECT min(day) FROM touched_days)
      AND event_time < (SELECT max(day) FROM touched_days) + INTERVAL 1 DAY
)
SELECT t.release, t.day, count(s.day) AS rows
FROM touched_days t LEFT JOIN stored s USING (release, day)
GROUP BY ALL
ORDER BY t.release, t.day
