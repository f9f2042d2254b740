-- name: insert_file
-- description: one manifest row of a Spark batch, with its reserved file_id and its final counts
-- params: file_id, path, size_bytes, sha256, rows_read, accepted, quarantined, duplicates, status, reason, extra_columns, missing_columns, ingested_at
INSERT INTO files VALUES (
    $file_id, $path, $size_bytes, $sha256, $rows_read, $accepted, $quarantined, $duplicates,
    $status, $reason, $extra_columns, $missing_columns, $ingested_at
)
