-- name: record_day
-- description: a day verified in the archive: from now on it is read there
-- params: kind, release, day (date), rows, checksum, table_version, archived_at (timestamp)
INSERT OR REPLACE INTO archived_days (kind, release, day, rows, checksum, table_version, archived_at)
VALUES ($kind, $release, CAST($day AS DATE), $rows, $checksum, $table_version, $archived_at)
