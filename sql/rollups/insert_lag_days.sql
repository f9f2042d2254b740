-- name: insert_lag_days
-- description: the log-bucket histogram of arrival lag (hours from event_time to the ingestion of the row's file) per group of the rows of chunk_rows, as rollup_hist's figure 'lag' (DuckDB: Spark keeps no per-row link to its files)
-- params: log_gamma
INSERT INTO rollup_hist
WITH lags AS (
    SELECT e.release, e.day, e.task, e.route, e.device_tier, e.network_bucket,
           epoch(f.ingested_at - e.event_time) / 3600.0 AS x
    FROM chunk_rows e JOIN files f USING (file_id)
)
SELECT release, day, task, route, device_tier, network_bucket, 'lag' AS figure,
       CASE WHEN x > 1e-9 THEN 1000000 + CAST(ceil(ln(x) / $log_gamma) AS BIGINT)
            WHEN x < -1e-9 THEN -1000000 - CAST(ceil(ln(-x) / $log_gamma) AS BIGINT)
            ELSE 0 END AS bin,
       count(*) AS n
FROM lags
GROUP BY ALL
