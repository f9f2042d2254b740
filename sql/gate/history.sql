-- name: history
-- description: the verdicts of a release over time, newest first
-- params: release, limit
SELECT evaluation_id, evaluated_at, as_of, verdict, segments_judged, segments_rolled_back, failed_gates,
       config_digest, code_version, trigger
FROM evaluations WHERE release = $release ORDER BY evaluated_at DESC, evaluation_id DESC LIMIT $limit
