-- name: stored_at
-- description: when an evaluation was stored
-- params: evaluation_uid
SELECT stored_at FROM evaluations WHERE evaluation_uid = $evaluation_uid
