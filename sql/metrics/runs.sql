-- name: runs
-- description: the job runs for `pipeline metrics`: the last one, and the last successful one
-- params:
SELECT (SELECT max(finished_at) FROM runs WHERE status = 'ok') AS last_success,
       (SELECT epoch(finished_at - started_at) FROM runs WHERE finished_at IS NOT NULL
        ORDER BY finished_at DESC, run_id DESC LIMIT 1) AS last_duration_seconds,
       (SELECT status FROM runs WHERE finished_at IS NOT NULL ORDER BY finished_at DESC, run_id DESC LIMIT 1)
           AS last_status
