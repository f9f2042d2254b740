SELECT DISTINCT
  release
FROM rollup_daily
WHERE
  day >= CAST(:window_start AS DATE) AND day < CAST(:window_end AS DATE)
ORDER BY
  release NULLS LAST
