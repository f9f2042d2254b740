-- name: start_run
-- description: record that a job run started; returns its id
-- params: kind, started_at
INSERT INTO runs VALUES (nextval('run_id_seq'), $kind, $started_at, NULL, 'running', NULL, NULL) RETURNING run_id
