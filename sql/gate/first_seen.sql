-- name: first_seen
-- description: the release's first event time in the window (how many days of inflow the window holds), from the device-day rollup
-- params: release, window_start, window_end
SELECT min(first_at) AS first_seen
FROM rollup_device_day
WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
