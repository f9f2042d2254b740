-- name: reserve_file_ids
-- description: file_ids for a Spark batch's manifest rows, taken before Spark writes the rows that carry them
-- params: n
SELECT nextval('file_id_seq') AS file_id FROM range($n)
