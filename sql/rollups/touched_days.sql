-- name: touched_days
-- description: the (release, day) pairs recomputed whole: with rows from files newer than the rollup's high-water mark, left by a replaced row, or added to by an intra-day look; for a look's refresh (whole false) only those left by a replaced row
-- params: after_file_id, whole
-- A full rebuild passes -1: every stored row, also those loaded without a manifest row (file_id 0 or null).
CREATE OR REPLACE TEMP TABLE touched_days AS
SELECT DISTINCT release, CAST(event_time AS DATE) AS day FROM events WHERE $whole AND coalesce(file_id, 0) > $after_file_id
UNION
SELECT release, day FROM rollup_stale_days
UNION
SELECT release, day FROM rollup_provisional_days WHERE $whole
