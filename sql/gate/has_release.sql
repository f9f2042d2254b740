-- name: has_release
-- description: whether the release has stored rows (stops at the first)
-- params: release
SELECT EXISTS (SELECT 1 FROM events WHERE release = $release) AS present
