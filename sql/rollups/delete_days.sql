-- name: delete_days
-- description: drop the rollup rows of the touched days before they are recomputed
DELETE FROM rollup_daily r USING touched_days t WHERE r.release = t.release AND r.day = t.day
