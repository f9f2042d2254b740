-- name: load_event_partition
-- description: one Spark events partition's rows (registered as partition_rows, with its release) into an in-memory warehouse's events, to be archived as a DuckDB day is
INSERT INTO events BY NAME SELECT * FROM partition_rows
