-- name: replaced_per_file
-- description: how many stored rows of each earlier file lost to a copy in the file being stored
SELECT file_id, count(*) AS n FROM replaced GROUP BY file_id
