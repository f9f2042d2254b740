-- name: set_day_versions
-- description: the touched days were recomputed by this refresh: their version moves on (one number per refresh)
INSERT OR REPLACE INTO rollup_day_versions
SELECT release, day, (SELECT coalesce(max(version), 0) + 1 FROM rollup_day_versions) FROM touched_days
