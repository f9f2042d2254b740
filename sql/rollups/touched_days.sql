-- name: touched_days
-- description: the (release, day) pairs with rows from files newer than the rollup's high-water mark, or left by a replaced row
-- params: after_file_id
-- A full rebuild passes -1: every stored row, also those loaded without a manifest row (file_id 0 or null).
CREATE OR REPLACE TEMP TABLE touched_days AS
SELECT DISTINCT release, CAST(event_time AS DATE) AS day FROM events WHERE coalesce(file_id, 0) > $after_file_id
UNION
SELECT release, day FROM rollup_stale_days
