-- name: set_day_versions
-- description: the days this refresh recomputed whole (touched_days) take the next version of rollup_day_versions: a snapshot copies their roll-ups
-- The days an intra-day look's batch was added to keep theirs: a snapshot carries whole refreshes' roll-ups, and
-- takes those days when the next whole refresh recomputes them (the look's own figures are in intraday_looks).
INSERT OR REPLACE INTO rollup_day_versions
SELECT release, day, (SELECT coalesce(max(version), 0) + 1 FROM rollup_day_versions) FROM touched_days
