-- name: active_releases
-- description: releases with edge or cloud rows in the evaluation window
-- params: window_start, window_end
SELECT DISTINCT release FROM events WHERE event_time >= $window_start AND event_time < $window_end ORDER BY release
