-- name: decision
-- description: a release's newest stored evaluation, its uid, and when the decision in force was stored (that evaluation or a later action)
-- params: release
SELECT e.result, e.evaluation_uid,
       greatest(coalesce(e.stored_at, e.evaluated_at),
                coalesce((SELECT max(a.stored_at) FROM rollout_actions a WHERE a.release = $release),
                         coalesce(e.stored_at, e.evaluated_at))) AS decided_at
FROM evaluations e
WHERE e.release = $release
ORDER BY e.evaluated_at DESC, e.evaluation_id DESC
LIMIT 1
