SELECT DISTINCT
  release
FROM rollup_device_day
WHERE
  day >= CAST(:window_start AS DATE) AND day < CAST(:window_end AS DATE)
ORDER BY
  release NULLS LAST
