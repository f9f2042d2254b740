-- name: delete_hist_days
-- description: drop the histogram rows of the touched days before they are recomputed
DELETE FROM rollup_hist r USING touched_days t WHERE r.release = t.release AND r.day = t.day
