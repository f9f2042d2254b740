-- name: reserve_file_ids
-- description: n new file_ids, in order: a group of manifest rows stored together, or a Spark batch's, taken before the rows that carry them are written
-- params: n
SELECT nextval('file_id_seq') AS file_id FROM range($n)
