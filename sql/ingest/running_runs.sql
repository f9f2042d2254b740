-- name: running_runs
-- description: the job runs recorded as running, with their process's identity (pipeline/warehouse/runs.py decides which are dead)
-- params:
SELECT run_id, kind, started_at, pid, host, proc_start FROM runs WHERE status = 'running' ORDER BY run_id
