-- name: due_event_days
-- description: the (release, day)s of raw events older than the archive's cutoff, with their rows, oldest first
-- params: cutoff (date)
-- A day moves whole: every event_time of it is before $cutoff (a midnight).
SELECT release, CAST(event_time AS DATE) AS day, count(*) AS rows
FROM events
WHERE event_time < CAST($cutoff AS DATE)
GROUP BY ALL
ORDER BY day, release
