-- name: batch_days
-- description: an intra-day look's refresh: the (release, day) pairs the rows of files newer than the rollup's high-water mark fall on, other than the days recomputed whole (touched_days); empty for a whole refresh
-- params: after_file_id, whole
CREATE OR REPLACE TEMP TABLE batch_days AS
SELECT DISTINCT release, CAST(event_time AS DATE) AS day FROM events WHERE NOT $whole AND file_id > $after_file_id
EXCEPT
SELECT release, day FROM touched_days
