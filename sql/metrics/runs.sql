-- name: runs
-- description: the whole-day job runs (nightly, scheduled: not the intra-day looks, which would keep the dead man's switch fresh while the nightly fails) for `pipeline metrics`: the last one, and the last successful one
-- params:
SELECT (SELECT max(finished_at) FROM runs WHERE status = 'ok' AND kind <> 'look') AS last_success,
       (SELECT epoch(finished_at - started_at) FROM runs WHERE finished_at IS NOT NULL AND kind <> 'look'
        ORDER BY finished_at DESC, run_id DESC LIMIT 1) AS last_duration_seconds,
       (SELECT status FROM runs WHERE finished_at IS NOT NULL AND kind <> 'look'
        ORDER BY finished_at DESC, run_id DESC LIMIT 1) AS last_status
