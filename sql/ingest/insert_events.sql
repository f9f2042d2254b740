-- name: insert_events
-- description: valid rows of a group's staged files whose event_id has no other copy (the common case); returns the count
-- params:
INSERT INTO events BY NAME
SELECT b.* EXCLUDE (_id, _staged_file), g.file_id
FROM stage.validated b
JOIN group_files g ON g.staged_file = b._staged_file
WHERE NOT EXISTS (SELECT 1 FROM batch_failures f WHERE f._id = b._id)
  AND NOT EXISTS (SELECT 1 FROM collided c WHERE c.event_id = b.event_id)
