-- name: promote_batch
-- description: the validated batch becomes the one being stored; the batch stored before it is dropped
DROP TABLE IF EXISTS stage.validated;
ALTER TABLE stage.batch RENAME TO validated
