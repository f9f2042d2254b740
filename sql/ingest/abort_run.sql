-- name: abort_run
-- description: mark a run whose process died without finishing it as aborted, saying what is known
-- params: run_id, finished_at, error
UPDATE runs SET status = 'aborted', finished_at = $finished_at, error = $error
WHERE run_id = $run_id AND status = 'running'
