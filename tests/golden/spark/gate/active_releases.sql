SELECT DISTINCT
  release
FROM events
WHERE
  event_time >= :window_start AND event_time < :window_end
ORDER BY
  release NULLS LAST
