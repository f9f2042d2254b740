-- name: loaded_files
-- description: content hashes of every file loaded or rejected for its bytes, with where, when and why
-- A file Great Expectations could not evaluate ("validator error") is tried again: the cause is the suite.
SELECT sha256, status, path, ingested_at, reason, rows_read FROM files
WHERE status = 'loaded' OR (status = 'rejected' AND reason NOT LIKE 'validator error:%')
QUALIFY row_number() OVER (PARTITION BY sha256 ORDER BY file_id) = 1
