SELECT
  release,
  SUM(rows) AS rows,
  CAST(MIN(day) AS TIMESTAMP_NTZ) AS first_event,
  CAST(MAX(day) + INTERVAL '1' DAY AS TIMESTAMP_NTZ) AS last_event
FROM rollup_daily
WHERE
  NOT release IN (
    SELECT DISTINCT
      release
    FROM events
  )
GROUP BY
  release
