-- name: intraday_fails
-- description: the failing looks of a release's intra-day looks, one row per segment and look, in time order
-- params: release
SELECT segment, CAST(as_of AS DATE) AS day, gates, evaluated_at
FROM (SELECT as_of, evaluated_at, unnest(failed_segments) AS segment, unnest(failed_gates) AS gates
      FROM intraday_looks WHERE release = $release)
ORDER BY evaluated_at, segment
