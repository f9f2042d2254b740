-- name: aborted_runs
-- description: the runs aborted since the last run that finished (ok, failed or interrupted): what the next nightly reports
-- params:
SELECT run_id, kind, started_at, error FROM runs
WHERE status = 'aborted'
  AND run_id > coalesce((SELECT max(run_id) FROM runs WHERE status IN ('ok', 'failed', 'interrupted')), 0)
ORDER BY run_id
