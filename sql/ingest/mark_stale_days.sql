-- name: mark_stale_days
-- description: the rollup days a replaced row leaves, for the next rollup refresh to recompute
INSERT INTO rollup_stale_days SELECT DISTINCT release, day FROM replaced
