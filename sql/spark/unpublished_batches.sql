-- name: unpublished_batches
-- description: committed Spark batches not yet published (a crash between commit and publish), oldest first
SELECT batch_id, clear FROM spark_batches WHERE published_at IS NULL ORDER BY batch_id
