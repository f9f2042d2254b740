WITH picked AS (
  SELECT
    *,
    CASE WHEN route = 'cloud' THEN 'cloud' ELSE 'edge' END AS side,
    CASE WHEN network_bucket <> :bucket_offline THEN rows ELSE 0 END AS online_rows,
    CASE WHEN network_bucket <> :bucket_offline THEN adopted ELSE 0 END AS online_adopted,
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
    AND (
      :segments = ''
      OR ARRAY_CONTAINS(
        SPLIT(:segments, CONCAT('\\Q', ',', '\\E')),
        task || '/' || device_tier || '/' || network_bucket
      )
    )
), per_device AS (
  SELECT
    side,
    task,
    device_tier,
    network_bucket,
    cell,
    GROUPING(task) * 4 + GROUPING(device_tier) * 2 + GROUPING(network_bucket) AS level,
    SUM(CAST(rows AS DOUBLE)) AS rows,
    SUM(CAST(adopted AS DOUBLE)) AS adopted,
    SUM(CAST(online_rows AS DOUBLE)) AS online_rows,
    SUM(CAST(online_adopted AS DOUBLE)) AS online_adopted,
    SUM(CAST(fallbacks AS DOUBLE)) AS fallbacks,
    SUM(CAST(failures AS DOUBLE)) AS failures,
    SUM(CAST(detected AS DOUBLE)) AS detected,
    SUM(CAST(throttled_n AS DOUBLE)) AS throttled_n,
    SUM(CAST(throttled AS DOUBLE)) AS throttled,
    SUM(CAST(peak_n AS DOUBLE)) AS peak_n,
    SUM(CAST(peak_over AS DOUBLE)) AS peak_over,
    SUM(CAST(resident_n AS DOUBLE)) AS resident_n,
    SUM(CAST(resident_over AS DOUBLE)) AS resident_over,
    SUM(CAST(total_n AS DOUBLE)) AS total_n,
    SUM(CAST(total_over AS DOUBLE)) AS total_over,
    SUM(CAST(cold_n AS DOUBLE)) AS cold_n,
    SUM(CAST(cold_over AS DOUBLE)) AS cold_over,
    SUM(CAST(rise_n AS DOUBLE)) AS rise_n,
    SUM(CAST(rise_over AS DOUBLE)) AS rise_over
  FROM picked
  GROUP BY
    GROUPING SETS (
      (side, task, device_tier, network_bucket, cell, device_id),
      (side, task, device_tier, device_id),
      (side, task, network_bucket, device_id),
      (side, task, device_id),
      (side, device_id)
    )
), weighted AS (
  SELECT
    *,
    CASE WHEN rows > 0 THEN LEAST(rows, :weight_cap) ELSE 0 END AS rows_w,
    CASE WHEN failures > 0 THEN LEAST(failures, :weight_cap) ELSE 0 END AS failures_w,
    CASE WHEN throttled_n > 0 THEN LEAST(throttled_n, :weight_cap) ELSE 0 END AS throttled_n_w,
    CASE WHEN online_rows > 0 THEN LEAST(online_rows, :weight_cap) ELSE 0 END AS online_rows_w
  FROM per_device
), contributions AS (
  SELECT
    *,
    CASE WHEN rows > 0 THEN rows_w * adopted / rows ELSE 0 END AS adopted_w,
    CASE WHEN rows > 0 THEN rows_w * fallbacks / rows ELSE 0 END AS fallbacks_w,
    CASE WHEN failures > 0 THEN failures_w * detected / failures ELSE 0 END AS detected_w,
    CASE WHEN throttled_n > 0 THEN throttled_n_w * throttled / throttled_n ELSE 0 END AS throttled_w,
    CASE
      WHEN online_rows > 0
      THEN online_rows_w * online_adopted / online_rows
      ELSE 0
    END AS online_adopted_w
  FROM weighted
)
SELECT
  side,
  task,
  device_tier,
  network_bucket,
  cell,
  level,
  COUNT(*) AS devices,
  CAST(SUM(rows) AS BIGINT) AS rows,
  SUM(rows_w) AS rows_w,
  SUM(rows_w * rows_w) AS rows_nn,
  SUM(rows_w * rows_w / rows) AS rows_ind,
  CAST(SUM(adopted) AS BIGINT) AS adopted,
  SUM(adopted_w) AS adopted_w,
  SUM(adopted_w * adopted_w) AS adopted_kk,
  SUM(adopted_w * rows_w) AS adopted_kn,
  CAST(SUM(online_rows) AS BIGINT) AS online_rows,
  SUM(online_rows_w) AS online_rows_w,
  SUM(online_rows_w * online_rows_w) AS online_rows_nn,
  SUM(CASE WHEN online_rows > 0 THEN online_rows_w * online_rows_w / online_rows END) AS online_rows_ind,
  COUNT(*) FILTER(WHERE
    online_rows > 0) AS online_rows_devices,
  CAST(SUM(online_adopted) AS BIGINT) AS online_adopted,
  SUM(online_adopted_w) AS online_adopted_w,
  SUM(online_adopted_w * online_adopted_w) AS online_adopted_kk,
  SUM(online_adopted_w * online_rows_w) AS online_adopted_kn,
  CAST(SUM(fallbacks) AS BIGINT) AS fallbacks,
  SUM(fallbacks_w) AS fallbacks_w,
  SUM(fallbacks_w * fallbacks_w) AS fallbacks_kk,
  SUM(fallbacks_w * rows_w) AS fallbacks_kn,
  CAST(SUM(failures) AS BIGINT) AS failures,
  SUM(failures_w) AS failures_w,
  SUM(failures_w * failures_w) AS failures_nn,
  SUM(CASE WHEN failures > 0 THEN failures_w * failures_w / failures END) AS failures_ind,
  COUNT(*) FILTER(WHERE
    failures > 0) AS failures_devices,
  CAST(SUM(detected) AS BIGINT) AS detected,
  SUM(detected_w) AS detected_w,
  SUM(detected_w * detected_w) AS detected_kk,
  SUM(detected_w * failures_w) AS detected_kn,
  CAST(SUM(throttled_n) AS BIGINT) AS throttled_n,
  SUM(throttled_n_w) AS throttled_n_w,
  SUM(throttled_n_w * throttled_n_w) AS throttled_n_nn,
  SUM(CASE WHEN throttled_n > 0 THEN throttled_n_w * throttled_n_w / throttled_n END) AS throttled_n_ind,
  COUNT(*) FILTER(WHERE
    throttled_n > 0) AS throttled_n_devices,
  CAST(SUM(throttled) AS BIGINT) AS throttled,
  SUM(throttled_w) AS throttled_w,
  SUM(throttled_w * throttled_w) AS throttled_kk,
  SUM(throttled_w * throttled_n_w) AS throttled_kn,
  CAST(SUM(peak_n) AS BIGINT) AS peak_n,
  SUM(peak_n * peak_n) AS peak_n_nn,
  COUNT(*) FILTER(WHERE
    peak_n > 0) AS peak_n_devices,
  CAST(SUM(peak_over) AS BIGINT) AS peak_over,
  SUM(peak_over * peak_over) AS peak_over_kk,
  SUM(peak_over * peak_n) AS peak_over_kn,
  CAST(SUM(resident_n) AS BIGINT) AS resident_n,
  SUM(resident_n * resident_n) AS resident_n_nn,
  COUNT(*) FILTER(WHERE
    resident_n > 0) AS resident_n_devices,
  CAST(SUM(resident_over) AS BIGINT) AS resident_over,
  SUM(resident_over * resident_over) AS resident_over_kk,
  SUM(resident_over * resident_n) AS resident_over_kn,
  CAST(SUM(total_n) AS BIGINT) AS total_n,
  SUM(total_n * total_n) AS total_n_nn,
  COUNT(*) FILTER(WHERE
    total_n > 0) AS total_n_devices,
  CAST(SUM(total_over) AS BIGINT) AS total_over,
  SUM(total_over * total_over) AS total_over_kk,
  SUM(total_over * total_n) AS total_over_kn,
  CAST(SUM(cold_n) AS BIGINT) AS cold_n,
  SUM(cold_n * cold_n) AS cold_n_nn,
  COUNT(*) FILTER(WHERE
    cold_n > 0) AS cold_n_devices,
  CAST(SUM(cold_over) AS BIGINT) AS cold_over,
  SUM(cold_over * cold_over) AS cold_over_kk,
  SUM(cold_over * cold_n) AS cold_over_kn,
  CAST(SUM(rise_n) AS BIGINT) AS rise_n,
  SUM(rise_n * rise_n) AS rise_n_nn,
  COUNT(*) FILTER(WHERE
    rise_n > 0) AS rise_n_devices,
  CAST(SUM(rise_over) AS BIGINT) AS rise_over,
  SUM(rise_over * rise_over) AS rise_over_kk,
  SUM(rise_over * rise_n) AS rise_over_kn
FROM contributions
GROUP BY
  side,
  task,
  device_tier,
  network_bucket,
  cell,
  level
