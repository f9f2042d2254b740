-- name: load_quarantine_partition
-- description: one Spark quarantine partition's rows (registered as partition_rows) into an in-memory warehouse's quarantine, to be archived as a DuckDB day is
INSERT INTO quarantine BY NAME SELECT * FROM partition_rows
