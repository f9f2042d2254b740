-- name: demote_replaced
-- description: a file whose stored row was replaced counts it as a duplicate from now on
UPDATE files SET accepted = accepted - r.n, duplicates = duplicates + r.n
FROM (SELECT file_id, count(*) AS n FROM replaced GROUP BY file_id) r
WHERE files.file_id = r.file_id
