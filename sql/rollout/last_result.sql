-- name: last_result
-- description: the newest stored evaluation of a release (the figures an action's alert quotes)
-- params: release
SELECT result FROM evaluations WHERE release = $release ORDER BY evaluated_at DESC, evaluation_id DESC LIMIT 1
