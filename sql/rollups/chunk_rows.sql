-- name: chunk_rows
-- description: the rows a recomputation rolls up, every stored row of the days in chunk_days: the view chunk_rows the insert_*.sql files read (an intra-day look's batch gives it batch_rows instead)
-- the range lets DuckDB skip row groups of other days
SELECT e.* FROM events_enriched e JOIN chunk_days t ON e.release = t.release AND e.day = t.day
WHERE e.event_time >= (SELECT min(day) FROM chunk_days)
  AND e.event_time < (SELECT max(day) FROM chunk_days) + INTERVAL 1 DAY
