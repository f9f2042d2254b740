-- name: ingest
-- description: rows and files over every ingest (the manifest), for `pipeline metrics` counters
-- params:
SELECT coalesce(sum(rows_read), 0) AS rows_read, coalesce(sum(accepted), 0) AS accepted,
       coalesce(sum(quarantined), 0) AS quarantined, coalesce(sum(duplicates), 0) AS duplicates,
       count(*) FILTER (WHERE status = 'rejected') AS files_rejected, count(*) FILTER (WHERE status = 'loaded') AS files_loaded
FROM files
