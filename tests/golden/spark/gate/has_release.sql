SELECT
  EXISTS(
    SELECT
      1
    FROM events
    WHERE
      release = :release
  ) AS present
