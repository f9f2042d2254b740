-- name: last_loaded_file
-- description: when the newest loaded file was ingested (NULL when none ever was)
SELECT max(ingested_at) FROM files WHERE status = 'loaded'
