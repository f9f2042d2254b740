-- name: start_run
-- description: record that a job run started (wall clock), the moment it judges by, and its process's identity; returns its id
-- params: kind, started_at, as_of, pid, host, proc_start
INSERT INTO runs (run_id, kind, started_at, as_of, status, pid, host, proc_start)
VALUES (nextval('run_id_seq'), $kind, $started_at, $as_of, 'running', $pid, $host, $proc_start) RETURNING run_id
