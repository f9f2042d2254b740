-- name: insert_winners
-- description: the winning copies of collided event_ids that come from the file being stored; returns the count
-- params: file_id
INSERT INTO events BY NAME
SELECT * EXCLUDE (content_hash, stored, wins), $file_id AS file_id FROM contest WHERE wins AND NOT stored
