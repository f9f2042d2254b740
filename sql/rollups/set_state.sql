-- name: set_state
-- description: record how far the rollup has got
-- params: last_file_id, settings_digest, refreshed_at
INSERT INTO rollup_state VALUES ($last_file_id, $settings_digest, $refreshed_at)
