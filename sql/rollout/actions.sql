-- name: actions
-- description: the people's actions on a release's rollout, oldest first
-- params: release
SELECT action_id, release, segment, action, reason, actor, taken_at, until, gates, previous
FROM rollout_actions WHERE release = $release ORDER BY taken_at, action_id
