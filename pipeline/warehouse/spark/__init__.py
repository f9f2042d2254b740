"""The Spark engine (`--engine spark`). Nothing in this package is imported unless Spark is asked for:
pyspark and sqlglot stay off the DuckDB paths (`pipeline --help`, `pipeline gate` on DuckDB).

    dialect.py   sql/ (DuckDB dialect) -> Spark SQL: the pinned SQLGlot dialect subclass
    session.py   the session: local, spark-submit or Spark Connect; UTC; string partition columns
    storage.py   the partitioned Parquet tables (events, quarantine, rollups) and their publish step
    engine.py    SparkEngine: a named sql/ file run with bound parameters (pipeline/warehouse/engine.py's boundary)
    batches.py   a batch of staged Parquet committed through the DuckDB file, then published (or rolled forward)
    aggregate.py the daily rollup and its histograms, per (release, day) partition
    archive.py   partitions past the archive settings moved to the Delta archive (pipeline/warehouse/archive.py)

Ingest on Spark (landed files -> validated, deduplicated rows) is pipeline/ingest/spark.py.
"""
