-- name: record
-- description: one publish of a routing table to a target, or its failure
-- params: target, release, sha256, evaluation_uid, kind, reason, actor, decided_at, published_at, seconds, status, etag, version_id, error
INSERT INTO routing_publishes (target, release, sha256, evaluation_uid, kind, reason, actor, decided_at,
                               published_at, seconds, status, etag, version_id, error)
VALUES ($target, $release, $sha256, $evaluation_uid, $kind, $reason, $actor, $decided_at, $published_at,
        $seconds, $status, $etag, $version_id, $error)
