-- name: finish_run
-- description: record how a job run ended
-- params: run_id, finished_at, status, summary, error
UPDATE runs SET finished_at = $finished_at, status = $status, summary = $summary, error = $error
WHERE run_id = $run_id
