-- name: add_batch_hist
-- description: add an intra-day batch's histogram counts (temp table batch_hist, as rollup_hist) to rollup_hist: counts per bucket add up
MERGE INTO rollup_hist r USING batch_hist b
ON r.release = b.release AND r.day = b.day AND r.task = b.task AND r.route = b.route
   AND r.device_tier = b.device_tier AND r.network_bucket = b.network_bucket AND r.figure = b.figure AND r.bin = b.bin
WHEN MATCHED THEN UPDATE SET n = r.n + b.n
WHEN NOT MATCHED THEN INSERT
