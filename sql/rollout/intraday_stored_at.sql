-- name: intraday_stored_at
-- description: when an intra-day look was stored, and which segments' rollout states it moved
-- params: look_uid
SELECT stored_at, moved FROM intraday_looks WHERE look_uid = $look_uid
