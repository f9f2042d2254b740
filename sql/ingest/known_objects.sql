-- Of one listing page's objects ($keys, $sizes, $etags in step), those already read: never fetched again.
SELECT o.key
FROM landed_objects o
JOIN (SELECT unnest($keys::VARCHAR[]) AS key, unnest($sizes::BIGINT[]) AS size_bytes,
             unnest($etags::VARCHAR[]) AS etag) page USING (key, size_bytes, etag)
WHERE o.source = $source
