-- The objects a chunk fetched and the ingest decided (registered as chunk_objects), after their files are stored.
INSERT INTO landed_objects BY NAME
SELECT $source AS source, key, size_bytes, etag, version_id, sha256, status, $read_at AS read_at
FROM chunk_objects
ON CONFLICT DO NOTHING
