"""The engine boundary: how a named sql/ file is run with bound parameters and how its rows come back.

Every module that reads telemetry through sql/ calls `sqlfiles.run(engine, "gate/segment_counts", params)`
and reads the result like a DuckDB cursor (`description`, `fetchall()`, `fetchone()`). What `engine` is
decides where the SQL runs:

- a DuckDB connection, or `DuckDBEngine(con)`: the file's text, as written, with `$name` parameters;
- `pipeline.warehouse.spark.engine.SparkEngine`: the same file transpiled to Spark SQL by the pinned SQLGlot dialect
  of pipeline/warehouse/spark/dialect.py (checked against tests/golden/spark/), with `:name` parameters.

The gate's Python is the same on both: only this boundary knows which engine ran. Nothing here imports
pyspark or sqlglot; `open_spark_engine` does, when Spark is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

SKETCH = "log_histogram"  # the name of the quantile estimator in every output


@dataclass
class Rows:
    """A result fetched whole, read like a DuckDB cursor."""

    columns: list[str]
    rows: list[tuple]
    _next: int = 0

    @property
    def description(self) -> list[tuple[str]]:
        return [(c,) for c in self.columns]

    def fetchall(self) -> list[tuple]:
        rest, self._next = self.rows[self._next:], len(self.rows)
        return rest

    def fetchone(self) -> tuple | None:
        if self._next >= len(self.rows):
            return None
        self._next += 1
        return self.rows[self._next - 1]


class SqlEngine(Protocol):
    """What sqlfiles.run needs from an engine."""

    engine_name: str

    def run_sql_file(self, relname: str, params: dict[str, Any]) -> Any: ...

    def arrow_sql_file(self, relname: str, params: dict[str, Any]) -> Any: ...


class DuckDBEngine:
    """The DuckDB implementation: the file's text on one connection (a raw connection works the same)."""

    engine_name = "duckdb"

    def __init__(self, con: Any):
        self.con = con

    def run_sql_file(self, relname: str, params: dict[str, Any]) -> Any:
        from pipeline.warehouse.sqlfiles import sql_file

        text = sql_file(relname).text
        return self.con.execute(text, params) if params else self.con.execute(text)

    def arrow_sql_file(self, relname: str, params: dict[str, Any]) -> Any:
        from pipeline.warehouse.sqlfiles import sql_file

        return self.con.sql(sql_file(relname).text, params=params).to_arrow_table()


def engine_name(engine: Any) -> str:
    """'duckdb' for a DuckDB connection or DuckDBEngine, 'spark' for a SparkEngine."""
    return getattr(engine, "engine_name", "duckdb")
