-- name: intraday_history
-- description: a release's intra-day looks, newest first: what each saw failing and which states it moved
-- params: release, limit
SELECT evaluated_at, as_of, verdict, failed_segments, moved, stored_at, look_uid
FROM intraday_looks WHERE release = $release ORDER BY evaluated_at DESC, look_uid DESC LIMIT $limit
