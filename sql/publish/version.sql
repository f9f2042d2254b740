-- name: version
-- description: the hash and decision time of one version this warehouse published
-- params: target, release, version_id
SELECT sha256, decided_at FROM routing_publishes
WHERE target = $target AND release = $release AND version_id = $version_id AND status = 'published'
LIMIT 1
