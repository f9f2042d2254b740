-- name: recent_runs
-- description: the newest job runs with their outcome, the raw events they moved to the archive, and the identity of a running one's process
-- params: limit
SELECT run_id, kind, started_at, finished_at, as_of, status, error, summary->>'$.verdicts' AS verdicts,
       CAST(summary->'$.steps.archive'->>'event_rows_moved' AS BIGINT) AS events_archived,
       CAST(summary->'$.steps.archive'->>'warehouse_bytes' AS BIGINT) AS warehouse_bytes,
       pid, host, proc_start
FROM runs ORDER BY run_id DESC LIMIT CAST($limit AS INTEGER)
