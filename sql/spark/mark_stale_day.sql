-- name: mark_stale_day
-- description: a (release, day) partition a Spark batch wrote or rewrote: the next rollup refresh recomputes it
-- params: release, day
INSERT INTO rollup_stale_days VALUES ($release, $day)
