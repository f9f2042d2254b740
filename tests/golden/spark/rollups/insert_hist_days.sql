WITH picked AS (
  SELECT
    *
  FROM chunk_rows
), vals AS (
  SELECT
    release,
    day,
    task,
    route,
    device_tier,
    network_bucket,
    'peak' AS figure,
    peak_mem_ratio AS x
  FROM picked
  WHERE
    NOT peak_mem_ratio IS NULL
  UNION ALL
  SELECT
    release,
    day,
    task,
    route,
    device_tier,
    network_bucket,
    'resident' AS figure,
    resident_mem_ratio AS x
  FROM picked
  WHERE
    NOT resident_mem_ratio IS NULL
  UNION ALL
  SELECT
    release,
    day,
    task,
    route,
    device_tier,
    network_bucket,
    'total' AS figure,
    total_ms AS x
  FROM picked
  WHERE
    NOT total_ms IS NULL
  UNION ALL
  SELECT
    release,
    day,
    task,
    route,
    device_tier,
    network_bucket,
    'cold' AS figure,
    cold_start_ms AS x
  FROM picked
  WHERE
    NOT cold_start_ms IS NULL
  UNION ALL
  SELECT
    release,
    day,
    task,
    route,
    device_tier,
    network_bucket,
    'rise' AS figure,
    temp_rise_c AS x
  FROM picked
  WHERE
    NOT temp_rise_c IS NULL
), binned AS (
  SELECT
    release,
    day,
    task,
    route,
    device_tier,
    network_bucket,
    figure,
    CASE
      WHEN x > 1e-9
      THEN 1000000 + CAST(CEIL(LN(x) / :log_gamma) AS BIGINT)
      WHEN x < -1e-9
      THEN -1000000 - CAST(CEIL(LN(-x) / :log_gamma) AS BIGINT)
      ELSE 0
    END AS bin
  FROM vals
)
SELECT
  release,
  day,
  task,
  route,
  device_tier,
  network_bucket,
  figure,
  bin,
  COUNT(*) AS n
FROM binned
GROUP BY
  release,
  day,
  task,
  route,
  device_tier,
  network_bucket,
  figure,
  bin
