-- name: insert_files
-- description: the manifest rows of a group of files stored in one transaction (group_files: their file_ids reserved, their counts)
-- params: ingested_at
INSERT INTO files BY NAME
SELECT file_id, path, size_bytes, sha256, rows_read, accepted, quarantined, duplicates, status, reason,
       extra_columns, missing_columns, $ingested_at AS ingested_at
FROM group_files
