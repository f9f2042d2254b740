-- name: last_file_id
-- description: the newest file_id in the manifest (0 when it is empty): every row stored so far has a file_id up to it
SELECT coalesce(max(file_id), 0) FROM files
