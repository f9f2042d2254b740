-- name: state_releases
-- description: the releases with a stored rollout state (Alertmanager is kept in step with all of them)
-- params:
SELECT DISTINCT release FROM rollout_state ORDER BY release
