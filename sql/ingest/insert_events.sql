-- name: insert_events
-- description: valid rows of one staged file whose event_id has no other copy (the common case); returns the count
-- params: file_id, first, last
INSERT INTO events BY NAME
SELECT b.* EXCLUDE (_id), $file_id AS file_id
FROM stage.validated b
WHERE b._id BETWEEN $first AND $last
  AND NOT EXISTS (SELECT 1 FROM batch_failures f WHERE f._id = b._id)
  AND NOT EXISTS (SELECT 1 FROM collided c WHERE c.event_id = b.event_id)
