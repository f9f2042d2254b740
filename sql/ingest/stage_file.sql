-- name: stage_file
-- description: one file of the staged batch on its own, to find which file Great Expectations cannot evaluate
-- params: first, last
CREATE OR REPLACE TABLE stage.file AS SELECT * FROM stage.batch WHERE _id BETWEEN $first AND $last
