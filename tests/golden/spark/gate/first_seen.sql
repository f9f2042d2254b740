SELECT
  MIN(event_time) AS first_seen
FROM events_enriched
WHERE
  release = :release AND event_time >= :window_start AND event_time < :window_end
