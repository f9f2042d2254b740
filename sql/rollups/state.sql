-- name: state
-- description: the rollup's high-water mark (last file folded in) and the settings it was computed with
SELECT last_file_id, settings_digest FROM rollup_state
