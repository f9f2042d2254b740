-- name: last_scheduled_run
-- description: when the newest scheduled run started
SELECT max(started_at) FROM runs WHERE kind = 'scheduled'
