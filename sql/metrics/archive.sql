-- name: archive
-- description: rows and days in the archive per kind (events, quarantine), and the sizes the last run that archived measured (NULL before one)
WITH sizes AS (
    SELECT CAST(summary -> 'steps' -> 'archive' ->> 'warehouse_bytes' AS BIGINT) AS warehouse_bytes,
           CAST(summary -> 'steps' -> 'archive' ->> 'archive_bytes' AS BIGINT) AS archive_bytes
    FROM runs
    WHERE summary -> 'steps' -> 'archive' ->> 'warehouse_bytes' IS NOT NULL
    ORDER BY run_id DESC
    LIMIT 1
),
kinds AS (SELECT unnest(['events', 'quarantine']) AS kind)
SELECT k.kind, count(a.day) AS days, coalesce(sum(a.rows), 0) AS rows,
       (SELECT warehouse_bytes FROM sizes) AS warehouse_bytes, (SELECT archive_bytes FROM sizes) AS archive_bytes
FROM kinds k LEFT JOIN archived_days a USING (kind)
GROUP BY k.kind
ORDER BY k.kind
