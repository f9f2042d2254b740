-- name: looks_before_actions
-- description: every look of a release, per segment in day order, in a warehouse no writer of this version opened yet
-- params: release
SELECT segment, day, outcome, decision, failed_gates, [] AS held_gates, evaluated_at FROM rollout_looks
WHERE release = $release ORDER BY segment, day
