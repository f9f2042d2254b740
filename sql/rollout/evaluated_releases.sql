-- name: evaluated_releases
-- description: the releases with a stored evaluation (routing.previous_edge looks for the one before a release)
-- params:
SELECT DISTINCT release FROM evaluations
