-- name: active_releases
-- description: releases with edge or cloud rows in the evaluation window (pipeline/gate/window.py), from the device-day rollup the gate reads (an intra-day look adds its batch to it; the daily rollup of those days waits for the next whole refresh)
-- params: window_start, window_end
SELECT DISTINCT release FROM rollup_device_day
WHERE day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
ORDER BY release
