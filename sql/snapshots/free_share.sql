-- name: free_share
-- description: the share of a snapshot file's blocks that are free (rows its updates deleted): over FREE_SHARE_LIMIT it is built whole again
SELECT CAST(free_blocks AS DOUBLE) / greatest(total_blocks, 1) AS free_share
FROM pragma_database_size()
WHERE database_name = current_database()
