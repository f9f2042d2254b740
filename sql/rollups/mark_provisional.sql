-- name: mark_provisional
-- description: the days an intra-day look's batch was added to: their rollup_daily waits, and the next whole refresh recomputes them
INSERT OR IGNORE INTO rollup_provisional_days SELECT release, day FROM batch_days
