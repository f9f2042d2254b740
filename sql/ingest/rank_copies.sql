-- name: rank_copies
-- description: every valid copy of a collided event_id (this file's and the stored one), and which copy wins
-- params: first, last
-- The winner does not depend on arrival order: the earliest event_time, then the smallest content hash,
-- md5 of the copy's contract columns as DuckDB's to_json text. Identical copies tie; the stored one stays.
CREATE OR REPLACE TEMP TABLE contest AS
WITH new_copies AS (
    SELECT b.* EXCLUDE (_id, _staged_file) FROM stage.validated b
    WHERE b._id BETWEEN $first AND $last AND b.event_id IN (SELECT event_id FROM collided)
      AND NOT EXISTS (SELECT 1 FROM batch_failures f WHERE f._id = b._id)
),
stored_copies AS (
    SELECT * EXCLUDE (file_id) FROM events WHERE event_id IN (SELECT event_id FROM new_copies)
),
copies AS (
    SELECT n.*, md5(CAST(to_json(n) AS VARCHAR)) AS content_hash, false AS stored FROM new_copies n
    UNION ALL BY NAME
    SELECT s.*, md5(CAST(to_json(s) AS VARCHAR)) AS content_hash, true AS stored FROM stored_copies s
)
SELECT *, row_number() OVER (PARTITION BY event_id ORDER BY event_time, content_hash, stored DESC) = 1 AS wins
FROM copies
