-- name: start_run
-- description: record that a job run started, with its process's identity; returns its id
-- params: kind, started_at, pid, host, proc_start
INSERT INTO runs (run_id, kind, started_at, status, pid, host, proc_start)
VALUES (nextval('run_id_seq'), $kind, $started_at, 'running', $pid, $host, $proc_start) RETURNING run_id
