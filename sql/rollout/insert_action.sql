-- name: insert_action
-- description: store one action once; returns its id when it is new
-- params: action_id, release, segment, action, reason, actor, taken_at, until, gates, previous, stored_at
INSERT INTO rollout_actions VALUES ($action_id, $release, $segment, $action, $reason, $actor, $taken_at, $until,
                                    $gates, $previous, $stored_at)
ON CONFLICT (action_id) DO NOTHING
RETURNING action_id
