-- name: last_alert
-- description: the newest alert raised for a release (any sink)
-- params: release
SELECT signature, created_at FROM alerts WHERE release = $release ORDER BY created_at DESC LIMIT 1
