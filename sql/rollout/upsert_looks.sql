-- name: upsert_looks
-- description: record the looks of one evaluation (one row per segment, the lists zipped); a later evaluation of the same day replaces a look
-- params: release, segment, day, outcome, decision, failed_gates, evaluation_uid, evaluated_at, trigger, held_gates
-- segment, day, outcome, decision, failed_gates and held_gates are lists, one element per look, in the same order
-- (one statement for the release's segments: a statement per segment cost ~4 ms each)
INSERT INTO rollout_looks (release, segment, day, outcome, decision, failed_gates, evaluation_uid, evaluated_at,
                           trigger, held_gates)
SELECT $release, segment, day, outcome, decision, failed_gates, $evaluation_uid, $evaluated_at, $trigger, held_gates
FROM (SELECT unnest(CAST($segment AS VARCHAR[])) AS segment, unnest(CAST($day AS DATE[])) AS day,
             unnest(CAST($outcome AS VARCHAR[])) AS outcome, unnest(CAST($decision AS VARCHAR[])) AS decision,
             unnest(CAST($failed_gates AS VARCHAR[][])) AS failed_gates,
             unnest(CAST($held_gates AS VARCHAR[][])) AS held_gates)
ON CONFLICT (release, segment, day) DO UPDATE SET
    outcome = excluded.outcome, decision = excluded.decision, failed_gates = excluded.failed_gates,
    evaluation_uid = excluded.evaluation_uid, evaluated_at = excluded.evaluated_at, trigger = excluded.trigger,
    held_gates = excluded.held_gates
WHERE excluded.evaluated_at >= rollout_looks.evaluated_at
