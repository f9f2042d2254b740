-- name: insert_file
-- description: one manifest row; returns the new file_id
-- params: path, size_bytes, sha256, rows_read, accepted, quarantined, duplicates, status, reason, extra_columns, missing_columns, ingested_at
INSERT INTO files VALUES (
    nextval('file_id_seq'), $path, $size_bytes, $sha256, $rows_read, $accepted, $quarantined, $duplicates,
    $status, $reason, $extra_columns, $missing_columns, $ingested_at
) RETURNING file_id
