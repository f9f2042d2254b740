-- name: intraday_moved
-- description: record which segments' rollout states an intra-day look moved
-- params: look_uid, moved
UPDATE intraday_looks SET moved = CAST($moved AS VARCHAR[]) WHERE look_uid = $look_uid
