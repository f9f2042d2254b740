-- name: intraday_landed
-- description: record when the oldest file an intra-day look's run loaded had landed
-- params: look_uid, landed_from
UPDATE intraday_looks SET landed_from = $landed_from WHERE look_uid = $look_uid
