-- name: schema_current
-- description: whether a writer of this version opened the warehouse (rollout_actions and held_gates exist); a
--   reader of an older warehouse reads its looks without them until the next writer adds them
SELECT count(*) = 1 FROM duckdb_columns()
WHERE database_name = current_database() AND table_name = 'rollout_looks' AND column_name = 'held_gates'
