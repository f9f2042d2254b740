-- name: device_days
-- description: per segment, per device tier and release-wide, the edge device-days, those over the daily edge-seconds cap and those with a kill, summed per device (the unit of independence), from the device-day rollup
-- params: release, window_start, window_end, kill_codes, by
-- A segment's device-day is a day with edge rows of that segment; a tier's, a day with any edge row of a device
-- of that tier (kill_rate is judged there: a kill is the device's, whatever task or network it served);
-- release-wide, a day with any edge row. The
-- cap is on a device's whole day of edge inference, across tasks and networks; a kill day is a device-day of
-- the level with a row whose error_code is one of $kill_codes (gates/admission.yaml gates.kill_rate).
-- Per device: days (n), over_cap and kill_days (k); summed with their squares and cross products as in
-- segment_counts.sql, for the device-level variance of pipeline/gate/stats.py. `cell` and $by as there (segments and
-- tiers: a drill of kill_rate splits the tier's device-days).
WITH picked AS (
    SELECT task, device_tier, network_bucket, device_id, day, total_ms_sum,
           list_has_any(error_codes, $kill_codes) AS killed,
           concat_ws(chr(31),
                     CASE WHEN list_contains(string_split($by, ','), 'soc') THEN coalesce(soc, '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'os_version') THEN coalesce(os_version, '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'mem_class_gb')
                          THEN coalesce(CAST(mem_class_gb AS VARCHAR), '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'npu_ready')
                          THEN coalesce(CAST(npu_ready AS VARCHAR), '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'model_id') THEN coalesce(model_id, '(null)') END,
                     CASE WHEN list_contains(string_split($by, ','), 'app_version') THEN coalesce(app_version, '(null)') END
           ) AS cell
    FROM rollup_device_day
    WHERE release = $release AND day >= CAST($window_start AS DATE) AND day < CAST($window_end AS DATE)
      AND route <> 'cloud'
),
totals AS (
    SELECT device_id, day, sum(total_ms_sum) / 1000.0 AS edge_seconds FROM picked GROUP BY device_id, day
),
level_days AS (
    SELECT task, device_tier, network_bucket, cell, device_id, day,
           grouping(task) * 4 + grouping(device_tier) * 2 + grouping(network_bucket) AS level,
           bool_or(killed) AS killed
    FROM picked
    GROUP BY GROUPING SETS ((task, device_tier, network_bucket, cell, device_id, day),
                            (device_tier, cell, device_id, day), (device_id, day))
),
per_device AS (
    SELECT s.task, s.device_tier, s.network_bucket, s.cell, s.level, s.device_id, count(*) AS days,
           count(*) FILTER (WHERE t.edge_seconds > (SELECT daily_edge_seconds_cap FROM settings_in_effect)) AS over_cap,
           count(*) FILTER (WHERE s.killed) AS kill_days
    FROM level_days s JOIN totals t ON s.device_id = t.device_id AND s.day = t.day
    GROUP BY s.task, s.device_tier, s.network_bucket, s.cell, s.level, s.device_id
)
SELECT task, device_tier, network_bucket, cell, level, count(*) AS devices,  -- level 0 segment, 5 tier, 7 release
       sum(days) AS days, sum(days * days) AS days_nn,
       sum(over_cap) AS over_cap, sum(over_cap * over_cap) AS over_cap_kk, sum(over_cap * days) AS over_cap_kn,
       sum(kill_days) AS kill_days, sum(kill_days * kill_days) AS kill_days_kk, sum(kill_days * days) AS kill_days_kn
FROM per_device
GROUP BY task, device_tier, network_bucket, cell, level
