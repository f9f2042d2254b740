-- name: mark_published
-- description: a Spark batch's files are in their partitions
-- params: batch_id, published_at
UPDATE spark_batches SET published_at = $published_at WHERE batch_id = $batch_id
