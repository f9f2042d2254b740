-- name: find_loaded_file
-- description: an already loaded file with the same content, if any
-- params: sha256
SELECT path, ingested_at FROM files WHERE sha256 = $sha256 AND status = 'loaded' LIMIT 1
