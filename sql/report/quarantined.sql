-- name: quarantined
-- description: report header: rows of the release that ingestion quarantined (all time)
-- params: release
SELECT count(*) AS quarantined FROM quarantine WHERE release = $release
