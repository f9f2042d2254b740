-- name: looks
-- description: every look of a release, per segment in day order
-- params: release
SELECT segment, day, outcome, decision, failed_gates, held_gates, evaluated_at FROM rollout_looks
WHERE release = $release ORDER BY segment, day
