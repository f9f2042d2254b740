-- name: set_day_versions
-- description: the days this refresh recomputed or added to (touched_days, batch_days) take the next version of rollup_day_versions: a snapshot copies their roll-ups
INSERT OR REPLACE INTO rollup_day_versions
SELECT release, day, (SELECT coalesce(max(version), 0) + 1 FROM rollup_day_versions)
FROM (SELECT release, day FROM touched_days UNION SELECT release, day FROM batch_days)
