SELECT
  e.*
FROM events_enriched AS e
JOIN chunk_days AS t
  ON e.release = t.release AND e.day = t.day
WHERE
  e.event_time >= (
    SELECT
      MIN(day)
    FROM chunk_days
  )
  AND e.event_time < (
    SELECT
      MAX(day)
    FROM chunk_days
  ) + INTERVAL '1' DAY
