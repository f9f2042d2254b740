-- name: segment_histograms
-- description: per side and segment (and task x bucket): the window's log-bucket histogram of each budgeted figure, merged from the daily rollup
-- params: release, window_start, window_end
-- The mergeable partials behind the sketch estimator (pipeline/warehouse/sketch.py): counts per bucket add up across
-- days, so a 14-day p95 reads 14 daily histograms, not 14 days of raw events. Ordered by group and bin: the reader
-- slices each group's histogram out of the columns instead of regrouping rows.
WITH h AS (
    SELECT CASE WHEN route = 'cloud' THEN 'cloud' ELSE 'edge' END AS side,
           task, device_tier, network_bucket, figure, bin, n
    FROM rollup_hist
    WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
      AND figure <> 'lag'
)
SELECT side, task, device_tier, network_bucket,
       grouping(task, device_tier, network_bucket) AS level,
       figure, bin, sum(n) AS n
FROM h
GROUP BY GROUPING SETS ((side, task, device_tier, network_bucket, figure, bin),
                        (side, task, network_bucket, figure, bin))
ORDER BY side, task, device_tier, network_bucket, level, figure, bin
