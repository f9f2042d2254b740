-- name: ingest_history
-- description: every file ingested or rejected, newest first, with its counts and reason
-- params: limit (optional, integer, default 50)
SELECT file_id, ingested_at, status, path, rows_read, accepted, quarantined, duplicates, reason
FROM files
ORDER BY file_id DESC
LIMIT coalesce(CAST($limit AS INTEGER), 50)
