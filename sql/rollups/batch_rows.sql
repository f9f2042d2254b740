-- name: batch_rows
-- description: an intra-day look's refresh: the rows of files newer than the rollup's high-water mark on the days of batch_days, as the temp table batch_rows
-- params: after_file_id
CREATE OR REPLACE TEMP TABLE batch_rows AS
SELECT e.* FROM events_enriched e JOIN batch_days t ON e.release = t.release AND e.day = t.day
WHERE e.file_id > $after_file_id
