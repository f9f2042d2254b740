-- name: chunk_days
-- description: the touched days one pass of insert_days recomputes: positions first..last in (release, day) order
-- params: first, last
CREATE OR REPLACE TEMP TABLE chunk_days AS
SELECT release, day
FROM (SELECT release, day, row_number() OVER (ORDER BY release, day) AS n FROM touched_days)
WHERE n BETWEEN $first AND $last
