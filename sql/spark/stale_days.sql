-- name: stale_days
-- description: the (release, day) pairs the next Spark rollup refresh recomputes
SELECT DISTINCT release, day FROM rollup_stale_days ORDER BY release, day
