-- name: source
-- description: the stored rows of one release in the window, which pipeline backtest replays night by night
-- params: release, window_start, window_end
SELECT * FROM events
WHERE release = $release AND event_time >= $window_start AND event_time < $window_end
