WITH picked AS (
  SELECT
    task,
    device_tier,
    network_bucket,
    device_id,
    day,
    total_ms_sum,
    ARRAYS_OVERLAP(error_codes, :kill_codes) AS killed,
    CONCAT_WS(
      CHR(  31),
      CASE
        WHEN ARRAY_CONTAINS(SPLIT(:by, CONCAT('\\Q', ',', '\\E')), 'soc')
        THEN COALESCE(soc, '(null)')
      END,
      CASE
        WHEN ARRAY_CONTAINS(SPLIT(:by, CONCAT('\\Q', ',', '\\E')), 'os_version')
        THEN COALESCE(os_version, '(null)')
      END,
      CASE
        WHEN ARRAY_CONTAINS(SPLIT(:by, CONCAT('\\Q', ',', '\\E')), 'mem_class_gb')
        THEN COALESCE(CAST(mem_class_gb AS STRING), '(null)')
      END,
      CASE
        WHEN ARRAY_CONTAINS(SPLIT(:by, CONCAT('\\Q', ',', '\\E')), 'npu_ready')
        THEN COALESCE(CAST(npu_ready AS STRING), '(null)')
      END,
      CASE
        WHEN ARRAY_CONTAINS(SPLIT(:by, CONCAT('\\Q', ',', '\\E')), 'model_id')
        THEN COALESCE(model_id, '(null)')
      END,
      CASE
        WHEN ARRAY_CONTAINS(SPLIT(:by, CONCAT('\\Q', ',', '\\E')), 'app_version')
        THEN COALESCE(app_version, '(null)')
      END
    ) AS cell
  FROM rollup_device_day
  WHERE
    release = :release
    AND day >= CAST(:window_start AS DATE)
    AND day < CAST(:window_end AS DATE)
    AND route <> 'cloud'
), totals AS (
  SELECT
    device_id,
    day,
    SUM(total_ms_sum) / 1000.0 AS edge_seconds
  FROM picked
  GROUP BY
    device_id,
    day
), level_days AS (
  SELECT
    task,
    device_tier,
    network_bucket,
    cell,
    device_id,
    day,
    GROUPING(task) * 4 + GROUPING(device_tier) * 2 + GROUPING(network_bucket) AS level,
    BOOL_OR(killed) AS killed
  FROM picked
  GROUP BY
    GROUPING SETS (
      (task, device_tier, network_bucket, cell, device_id, day),
      (device_tier, cell, device_id, day),
      (device_id, day)
    )
), per_device AS (
  SELECT
    s.task,
    s.device_tier,
    s.network_bucket,
    s.cell,
    s.level,
    s.device_id,
    COUNT(*) AS days,
    COUNT(*) FILTER(WHERE
      t.edge_seconds > (
        SELECT
          daily_edge_seconds_cap
        FROM settings_in_effect
      )) AS over_cap,
    COUNT(*) FILTER(WHERE
      s.killed) AS kill_days
  FROM level_days AS s
  JOIN totals AS t
    ON s.device_id = t.device_id AND s.day = t.day
  GROUP BY
    s.task,
    s.device_tier,
    s.network_bucket,
    s.cell,
    s.level,
    s.device_id
)
SELECT
  task,
  device_tier,
  network_bucket,
  cell,
  level,
  COUNT(*) AS devices,
  SUM(days) AS days,
  SUM(days * days) AS days_nn,
  SUM(over_cap) AS over_cap,
  SUM(over_cap * over_cap) AS over_cap_kk,
  SUM(over_cap * days) AS over_cap_kn,
  SUM(kill_days) AS kill_days,
  SUM(kill_days * kill_days) AS kill_days_kk,
  SUM(kill_days * days) AS kill_days_kn
FROM per_device
GROUP BY
  task,
  device_tier,
  network_bucket,
  cell,
  level
