-- name: recent_runs
-- description: the newest job runs with their outcome, and the identity of a running one's process
-- params: limit
SELECT run_id, kind, started_at, finished_at, status, error, summary->>'$.verdicts' AS verdicts, pid, host, proc_start
FROM runs ORDER BY run_id DESC LIMIT CAST($limit AS INTEGER)
