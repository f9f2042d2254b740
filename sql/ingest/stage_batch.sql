-- name: stage_batch
-- description: the cast rows of a batch of files as the staging table Great Expectations validates (_id = row in the batch)
CREATE OR REPLACE TABLE stage.batch AS SELECT * FROM incoming
