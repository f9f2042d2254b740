SELECT
  MIN(first_at) AS first_seen
FROM rollup_device_day
WHERE
  release = :release
  AND day >= CAST(:window_start AS DATE)
  AND day < CAST(:window_end AS DATE)
