-- name: insert_events
-- description: valid rows of the batch whose event_id is new: first copy within the batch, not already stored
-- params: file_id
INSERT INTO events BY NAME
SELECT * EXCLUDE (_row), $file_id AS file_id
FROM batch b
WHERE NOT EXISTS (SELECT 1 FROM batch_failures f WHERE f._row = b._row)
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = b.event_id)
QUALIFY row_number() OVER (PARTITION BY event_id ORDER BY _row) = 1
