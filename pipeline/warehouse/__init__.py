"""The warehouse: the telemetry contract (schema), DuckDB connections and the writer lock, the run's handle
(handle.py: the only opener of the file during a run), the SQL files,
job runs, the engine boundary, the daily rollup and its sketches, ad hoc SQL, and the Spark engine beside
DuckDB (warehouse/spark). May import pipeline.common only."""
