-- name: settle_provisional
-- description: the provisional days this refresh recomputed whole (touched_days) are provisional no more
DELETE FROM rollup_provisional_days p USING touched_days t WHERE p.release = t.release AND p.day = t.day
