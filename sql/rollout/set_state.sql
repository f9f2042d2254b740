-- name: set_state
-- description: store one segment's replayed rollout state
-- params: release, segment, state, since, last_day, last_decision, last_fail, passes, recent, failed_gates, reason, updated_at
INSERT OR REPLACE INTO rollout_state VALUES ($release, $segment, $state, $since, $last_day, $last_decision,
    $last_fail, $passes, $recent, $failed_gates, $reason, $updated_at)
