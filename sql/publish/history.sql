-- name: history
-- description: the versions this warehouse published for a target and release, with why
-- params: target, release
SELECT version_id, kind, reason, actor, evaluation_uid, seconds, sha256 FROM routing_publishes
WHERE target = $target AND release = $release AND status = 'published'
