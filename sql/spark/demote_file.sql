-- name: demote_file
-- description: a file whose stored row lost to a copy in a Spark batch counts it as a duplicate from now on
-- params: file_id, n
UPDATE files SET accepted = accepted - $n, duplicates = duplicates + $n WHERE file_id = $file_id
