-- name: insert_evaluation
-- description: store one gate evaluation
-- params: release, as_of, evaluated_at, verdict, segments_judged, segments_rolled_back, failed_gates, config_digest, code_version, result
INSERT INTO evaluations VALUES (nextval('evaluation_id_seq'), $release, $as_of, $evaluated_at, $verdict,
    $segments_judged, $segments_rolled_back, $failed_gates, $config_digest, $code_version, $result)
