-- name: touched_days
-- description: the (release, day) pairs with rows from files newer than the rollup's high-water mark, or left by a replaced row
-- params: after_file_id
CREATE OR REPLACE TEMP TABLE touched_days AS
SELECT DISTINCT release, CAST(event_time AS DATE) AS day FROM events WHERE file_id > $after_file_id
UNION
SELECT release, day FROM rollup_stale_days
