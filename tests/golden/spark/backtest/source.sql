SELECT
  *
FROM events
WHERE
  release = :release AND event_time >= :window_start AND event_time < :window_end
