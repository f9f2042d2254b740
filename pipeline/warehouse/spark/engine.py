"""SparkEngine: the Spark implementation of pipeline/warehouse/engine.py's boundary. A named sql/ file runs as the Spark
SQL of pipeline/warehouse/spark/dialect.py (the golden files), with the same bound parameters as on DuckDB, over views
that stand where DuckDB has tables and views:

    events, quarantine, rollup_daily, rollup_hist   the partitioned Parquet tables (pipeline/warehouse/spark/storage.py)
    settings_in_effect                              sql/views/settings_bound.sql, from the config in use
    events_enriched                                 the view of sql/ddl/derived.sql, transpiled

DuckDB's settings view reads session variables (`getvariable()`), which Spark has none of: the thresholds come
in as bound values instead, from the same config.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.common.config import Config
from pipeline.common.errors import EngineError, PipelineError
from pipeline.warehouse.aggregate import network_params
from pipeline.warehouse.engine import Rows
from pipeline.warehouse.spark import dialect
from pipeline.warehouse.spark.session import spark_problem
from pipeline.warehouse.spark.storage import PARTITIONS, TABLES, SparkTables, tables_of


def spark_value(value: Any) -> Any:
    """A bound value as Spark takes it: a naive datetime means UTC (PySpark would read it as local time)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, tuple):
        return list(value)
    return value


def table_schema(table: str) -> str:
    """The Spark schema of a stored table: its DDL columns, partition columns last, as strings."""
    parts = PARTITIONS[table]
    cols = [f"`{n}` {t}" for n, t in dialect.table_columns(table) if n not in parts]
    return ", ".join(cols + [f"`{p}` STRING" for p in parts])


class SparkEngine:
    engine_name = "spark"
    db_path: Path | None = None  # the DuckDB file with the bookkeeping (files, runs, evaluations, state)

    def __init__(self, session: Any, warehouse: SparkTables, config: Config):
        self.spark = session
        self.warehouse = warehouse
        self.config = config
        self._scope: dict[str, Any] | None = None
        self.refresh()

    def table(self, name: str) -> Any:
        """A stored table as a DataFrame (empty, with its schema, before its first write)."""
        schema = table_schema(name)
        if not self.warehouse.has_data(name):
            return self.spark.createDataFrame([], schema)
        return (self.spark.read.schema(schema).option("basePath", self.warehouse.table_uri(name))
                .parquet(self.warehouse.table_uri(name)))

    def refresh(self, scope: dict[str, Any] | None = None) -> None:
        """(Re)register the views: after a publish, so the new files are seen, or scoped to the partitions a
        query can read (`scope`: release, first and last date), so Spark lists and reads only those."""
        for name in TABLES:
            frame = self.table(name)
            if scope and "release" in PARTITIONS[name]:
                frame = _scoped(frame, scope)
            # `date` is the storage's partition column only: the SQL reads event_time and day, as on DuckDB
            frame.drop("date").createOrReplaceTempView(name)
        self.frame("views/settings_bound", network_params(self.config)).createOrReplaceTempView("settings_in_effect")
        self.spark.sql(dialect.spark_sql("ddl/derived#events_enriched")).createOrReplaceTempView("events_enriched")
        self._scope = scope

    def _rescope(self, params: dict[str, Any]) -> None:
        """A query bound to a release and a time window reads only that release's partitions of those days:
        the views are narrowed to them (a superset of its rows: `date` is the UTC day of event_time)."""
        scope: dict[str, Any] = {}
        if isinstance(params.get("release"), str):
            scope["release"] = params["release"]
        start, end = params.get("window_start"), params.get("window_end")
        if isinstance(start, datetime) and isinstance(end, datetime):
            scope["first"], scope["last"] = start.date().isoformat(), end.date().isoformat()
        if scope != (self._scope or {}):
            self.refresh(scope or None)

    def frame(self, relname: str, params: dict[str, Any] | None = None) -> Any:
        """The DataFrame of a SPARK_FILES entry (an INSERT's query: the caller writes it)."""
        args = {k: spark_value(v) for k, v in (params or {}).items()}
        return self.spark.sql(dialect.spark_sql(relname), args=args)

    def view_sql_file(self, relname: str, name: str) -> None:
        """A SPARK_FILES query as the temporary view `name` (pipeline/warehouse/sqlfiles.py view())."""
        self.frame(relname).createOrReplaceTempView(name)

    def run_sql_file(self, relname: str, params: dict[str, Any]) -> Rows:
        try:
            self._rescope(params)
            df = self.frame(relname, params)
            rows = df.collect()
        except Exception as exc:
            if isinstance(exc, PipelineError):
                raise
            raise EngineError(f"sql/{relname.partition('#')[0]}.sql on Spark: {spark_problem(exc)}") from None
        return Rows(list(df.columns), [tuple(_plain(v) for v in r) for r in rows])

    def arrow_sql_file(self, relname: str, params: dict[str, Any]) -> Any:
        """The rows as one Arrow table on the driver (backtest's source: it replays them in DuckDB)."""
        try:
            self._rescope(params)
            return self.frame(relname, params).toArrow()
        except Exception as exc:
            if isinstance(exc, PipelineError):
                raise
            raise EngineError(f"sql/{relname}.sql on Spark: {spark_problem(exc)}") from None


def _scoped(frame: Any, scope: dict[str, Any]) -> Any:
    from pyspark.sql import functions as F

    if "release" in scope:
        frame = frame.where(F.col("release") == scope["release"])
    if "first" in scope:
        frame = frame.where((F.col("date") >= scope["first"]) & (F.col("date") <= scope["last"]))
    return frame


def _plain(value: Any) -> Any:
    """Spark's Decimal results as float (DuckDB's DOUBLE figures); dates and the rest unchanged."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def open_engine(db_path: Path, config: Config, master: str | None = None, remote: str | None = None,
                warehouse: str | None = None) -> SparkEngine:
    """The Spark engine for the warehouse whose bookkeeping is `db_path`: the session (started or joined) and
    the Parquet root (--warehouse, else engine.spark.warehouse, else <db>.spark/ beside the DuckDB file)."""
    from pipeline.warehouse.spark.session import SessionSpec, get_session

    store = tables_of(db_path, config, warehouse)  # a bad location fails before Spark starts
    session = get_session(SessionSpec.of(config.engine.spark, master, remote))
    engine = SparkEngine(session, store, config)
    engine.db_path = db_path
    return engine
