-- name: daily_rates
-- description: report chart: adoption and fallback rate by UTC day, edge vs cloud, from the daily rollup
-- params: release, window_start, window_end
-- Whole days that overlap the window [window_start, window_end): the first and last may be partial.
SELECT day,
       CASE WHEN route = 'cloud' THEN 'cloud' ELSE 'edge' END AS side,
       sum(rows) AS rows,
       sum(adoption_rate * rows) / sum(rows) AS adoption_rate,
       sum(fallback_rate * rows) / sum(rows) AS fallback_rate
FROM rollup_daily
WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < $window_end
GROUP BY ALL
ORDER BY ALL
