-- name: thermal
-- description: temperature rise and throttling of edge requests by task and duration band
-- params: release
SELECT task,
       CASE WHEN total_ms < 2000 THEN '0-2 s' WHEN total_ms < 5000 THEN '2-5 s'
            WHEN total_ms < 10000 THEN '5-10 s' ELSE '>= 10 s' END AS duration,
       count(*) AS rows,
       round(quantile_cont(temp_rise_c, 0.5), 2) AS rise_p50_c,
       round(quantile_cont(temp_rise_c, 0.95), 2) AS rise_p95_c,
       round(avg(CAST(throttled AS DOUBLE)), 4) AS throttled_share
FROM all_events_enriched
WHERE release = $release AND on_device
GROUP BY ALL
ORDER BY task, min(total_ms)
