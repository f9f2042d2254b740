-- name: set_states
-- description: store the replayed rollout states of one release's segments (the lists zipped, one element per segment)
-- params: release, segment, state, since, last_day, last_decision, last_fail, passes, recent, failed_gates, reason, updated_at
INSERT OR REPLACE INTO rollout_state
SELECT $release, segment, state, since, last_day, last_decision, last_fail, passes, recent, failed_gates, reason,
       $updated_at
FROM (SELECT unnest(CAST($segment AS VARCHAR[])) AS segment, unnest(CAST($state AS VARCHAR[])) AS state,
             unnest(CAST($since AS DATE[])) AS since, unnest(CAST($last_day AS DATE[])) AS last_day,
             unnest(CAST($last_decision AS VARCHAR[])) AS last_decision,
             unnest(CAST($last_fail AS DATE[])) AS last_fail, unnest(CAST($passes AS INTEGER[])) AS passes,
             unnest(CAST($recent AS VARCHAR[])) AS recent, unnest(CAST($failed_gates AS VARCHAR[][])) AS failed_gates,
             unnest(CAST($reason AS VARCHAR[])) AS reason)
