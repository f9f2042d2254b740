-- name: insert_hist_days
-- description: the log-bucket histograms of the rows of chunk_rows (release x day x task x route x tier x bucket x figure): counts per bucket of each figure the gate budgets
-- params: log_gamma
-- Bucket k > 0 holds values in (gamma^(k-1-1000000), gamma^(k-1000000)]; negative buckets mirror them; 0 holds
-- values within 1e-9 of zero. gamma = (1 + e) / (1 - e) for the relative error e (engine.sketch_relative_error).
-- The same SQL runs on DuckDB and, transpiled, on Spark: both write the same buckets and counts.
INSERT INTO rollup_hist
WITH picked AS (SELECT * FROM chunk_rows),
vals AS (
    SELECT release, day, task, route, device_tier, network_bucket, 'peak' AS figure, peak_mem_ratio AS x
    FROM picked WHERE peak_mem_ratio IS NOT NULL
    UNION ALL
    SELECT release, day, task, route, device_tier, network_bucket, 'resident' AS figure, resident_mem_ratio AS x
    FROM picked WHERE resident_mem_ratio IS NOT NULL
    UNION ALL
    SELECT release, day, task, route, device_tier, network_bucket, 'total' AS figure, total_ms AS x
    FROM picked WHERE total_ms IS NOT NULL
    UNION ALL
    SELECT release, day, task, route, device_tier, network_bucket, 'cold' AS figure, cold_start_ms AS x
    FROM picked WHERE cold_start_ms IS NOT NULL
    UNION ALL
    SELECT release, day, task, route, device_tier, network_bucket, 'rise' AS figure, temp_rise_c AS x
    FROM picked WHERE temp_rise_c IS NOT NULL
),
binned AS (
    SELECT release, day, task, route, device_tier, network_bucket, figure,
           CASE WHEN x > 1e-9 THEN 1000000 + CAST(ceil(ln(x) / $log_gamma) AS BIGINT)
                WHEN x < -1e-9 THEN -1000000 - CAST(ceil(ln(-x) / $log_gamma) AS BIGINT)
                ELSE 0 END AS bin
    FROM vals
)
SELECT release, day, task, route, device_tier, network_bucket, figure, bin, count(*) AS n
FROM binned
GROUP BY release, day, task, route, device_tier, network_bucket, figure, bin
