SELECT
  release,
  COUNT(*) AS rows,
  MIN(event_time) AS first_event,
  MAX(event_time) AS last_event
FROM events
GROUP BY
  release
ORDER BY
  release NULLS LAST
