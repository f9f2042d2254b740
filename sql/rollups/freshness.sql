-- name: freshness
-- description: how far the rollup has got against the manifest: last file folded in, its settings, newest file, days waiting
SELECT (SELECT last_file_id FROM rollup_state) AS last_file_id,
       (SELECT settings_digest FROM rollup_state) AS settings_digest,
       (SELECT coalesce(max(file_id), 0) FROM files) AS newest_file_id,
       (SELECT count(*) FROM rollup_stale_days) AS stale_days
