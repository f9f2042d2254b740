-- name: views
-- description: the CREATE VIEW statements and names of the attached warehouse's views (catalog `warehouse`), for a snapshot
-- A view names its tables without a catalog, so in the snapshot it reads the snapshot's tables.
SELECT sql, view_name FROM duckdb_views()
WHERE database_name = 'warehouse' AND schema_name = 'main' AND NOT internal AND NOT temporary
ORDER BY view_oid
