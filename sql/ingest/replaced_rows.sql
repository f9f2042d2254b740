-- name: replaced_rows
-- description: stored rows that lose to a copy in the file being stored, with their file and rollup day
CREATE OR REPLACE TEMP TABLE replaced AS
SELECT e.event_id, e.file_id, e.release, CAST(e.event_time AS DATE) AS day
FROM events e
WHERE e.event_id IN (SELECT event_id FROM contest WHERE stored AND NOT wins)
