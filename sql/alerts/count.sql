-- name: count
-- description: how many alerts a release has raised (any sink): numbers the next one
-- params: release
SELECT count(DISTINCT alert_id) FROM alerts WHERE release = $release
