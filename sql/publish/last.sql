-- name: last
-- description: for a target and release, the hash of the last decision published there, and the ETag and version this warehouse last wrote there (a rollback's included)
-- params: target, release
SELECT (SELECT sha256 FROM routing_publishes
        WHERE target = $target AND release = $release AND status = 'published' AND kind <> 'rollback'
        ORDER BY published_at DESC LIMIT 1) AS decision_sha256,
       etag, version_id
FROM (SELECT 1) AS one
LEFT JOIN (SELECT etag, version_id FROM routing_publishes
           WHERE target = $target AND release = $release AND status = 'published'
           ORDER BY published_at DESC LIMIT 1) AS written ON true
