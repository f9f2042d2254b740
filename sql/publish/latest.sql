-- name: latest
-- description: per target, a release's last publish attempt and the last that succeeded
-- params: release
SELECT target, status, kind, published_at, seconds, version_id, error,
       (SELECT max(p.published_at) FROM routing_publishes p
        WHERE p.target = r.target AND p.release = r.release AND p.status = 'published') AS last_published_at
FROM routing_publishes r
WHERE release = $release
QUALIFY row_number() OVER (PARTITION BY target ORDER BY published_at DESC) = 1
ORDER BY target
