-- name: commit_batch
-- description: record a staged Spark batch as committed (in the transaction that stores its bookkeeping rows)
-- params: batch_id, kind, clear, committed_at
INSERT INTO spark_batches VALUES ($batch_id, $kind, $clear, $committed_at, NULL)
