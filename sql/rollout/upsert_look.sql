-- name: upsert_look
-- description: record one segment's look of one as-of day; a later evaluation of the same day replaces it
-- params: release, segment, day, outcome, decision, failed_gates, evaluation_uid, evaluated_at, trigger, held_gates
INSERT INTO rollout_looks (release, segment, day, outcome, decision, failed_gates, evaluation_uid, evaluated_at,
                           trigger, held_gates)
VALUES ($release, $segment, $day, $outcome, $decision, $failed_gates, $evaluation_uid, $evaluated_at, $trigger,
        $held_gates)
ON CONFLICT (release, segment, day) DO UPDATE SET
    outcome = excluded.outcome, decision = excluded.decision, failed_gates = excluded.failed_gates,
    evaluation_uid = excluded.evaluation_uid, evaluated_at = excluded.evaluated_at, trigger = excluded.trigger,
    held_gates = excluded.held_gates
WHERE excluded.evaluated_at >= rollout_looks.evaluated_at
