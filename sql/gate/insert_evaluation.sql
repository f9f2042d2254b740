-- name: insert_evaluation
-- description: store one gate evaluation, once (a pending fold retried after a crash does not store it twice)
-- params: release, as_of, evaluated_at, verdict, segments_judged, segments_rolled_back, failed_gates, config_digest, code_version, result, trigger, evaluation_uid, stored_at
INSERT INTO evaluations (evaluation_id, release, as_of, evaluated_at, verdict, segments_judged, segments_rolled_back,
                         failed_gates, config_digest, code_version, result, trigger, evaluation_uid, stored_at)
SELECT nextval('evaluation_id_seq'), $release, $as_of, $evaluated_at, $verdict, $segments_judged,
       $segments_rolled_back, $failed_gates, $config_digest, $code_version, $result, $trigger, $evaluation_uid, $stored_at
WHERE NOT EXISTS (SELECT 1 FROM evaluations WHERE evaluation_uid = $evaluation_uid)
RETURNING evaluation_id
