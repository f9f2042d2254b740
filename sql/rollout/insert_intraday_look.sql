-- name: insert_intraday_look
-- description: store one intra-day look, once (a pending fold retried after a crash does not store it twice)
-- params: look_uid, release, as_of, evaluated_at, stored_at, verdict, failed_segments, failed_gates, config_digest, code_version, result
INSERT INTO intraday_looks (look_uid, release, as_of, evaluated_at, stored_at, verdict, failed_segments, failed_gates,
                            moved, config_digest, code_version, result)
SELECT $look_uid, $release, $as_of, $evaluated_at, $stored_at, $verdict, CAST($failed_segments AS VARCHAR[]),
       CAST($failed_gates AS VARCHAR[][]), [], $config_digest, $code_version, $result
WHERE NOT EXISTS (SELECT 1 FROM intraday_looks WHERE look_uid = $look_uid)
RETURNING look_uid
