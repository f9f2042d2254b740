-- name: loaded_files
-- description: content hashes of every file already loaded, with where and when
SELECT sha256, path, ingested_at FROM files WHERE status = 'loaded'
