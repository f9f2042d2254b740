-- name: active_releases
-- description: releases with edge or cloud rows in the evaluation window (whole days: pipeline/gate/window.py), from the daily rollup
-- params: window_start, window_end
SELECT DISTINCT release FROM rollup_daily
WHERE day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
ORDER BY release
