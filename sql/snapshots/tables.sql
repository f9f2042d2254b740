-- name: tables
-- description: the base tables of the attached warehouse (catalog `warehouse`), in creation order, for a snapshot
SELECT table_name FROM duckdb_tables()
WHERE database_name = 'warehouse' AND schema_name = 'main' AND NOT temporary
ORDER BY table_oid
