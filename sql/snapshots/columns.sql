-- name: columns
-- description: whether every table has the same columns, in the same order and of the same types, in the warehouse (catalog `warehouse`) and in the snapshot being built (catalog `main`)
WITH cols AS (
    SELECT database_name, table_name, list(column_name || ' ' || data_type ORDER BY column_index) AS shape
    FROM duckdb_columns()
    WHERE database_name IN ('warehouse', current_database()) AND schema_name = 'main'
      AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND NOT temporary)
    GROUP BY ALL
)
SELECT count(*) = 0 AS same FROM (
    (SELECT table_name, shape FROM cols WHERE database_name = 'warehouse'
     EXCEPT SELECT table_name, shape FROM cols WHERE database_name <> 'warehouse')
    UNION ALL
    (SELECT table_name, shape FROM cols WHERE database_name <> 'warehouse'
     EXCEPT SELECT table_name, shape FROM cols WHERE database_name = 'warehouse'))
