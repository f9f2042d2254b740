-- name: states
-- description: the stored rollout state of every segment of a release
-- params: release
SELECT segment, state, since, last_day, last_decision, last_fail, passes, recent, failed_gates, reason, updated_at
FROM rollout_state WHERE release = $release ORDER BY segment
