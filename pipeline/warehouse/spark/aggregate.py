"""`pipeline aggregate --engine spark`: the daily rollup, its histograms and the device-day rollup, recomputed per
(release, day) partition with the same SQL as on DuckDB (sql/rollups/insert_days.sql, insert_hist_days.sql,
insert_device_days.sql, transpiled).

The days to recompute are the ones the Spark ingest marked (`rollup_stale_days` in the DuckDB file: every
partition it wrote or rewrote), or every events partition for a full rebuild (`--full`, or a change of the
settings the figures depend on). They are staged, committed with the rollup's state in one DuckDB
transaction, and published by replacing exactly those partitions.
"""

from __future__ import annotations

import time
from datetime import date, datetime
from pathlib import Path

from pipeline.common import clock
from pipeline.common.config import Config
from pipeline.warehouse import db, handle, sketch, sqlfiles
from pipeline.warehouse.aggregate import (
    ROLLUP_TABLES,
    RefreshResult,
    budget_params,
    save_settings,
    save_state,
    settings_digest,
)
from pipeline.warehouse.spark import batches
from pipeline.warehouse.spark.engine import SparkEngine
from pipeline.warehouse.spark.storage import new_batch_id


def refresh_spark(where: handle.Warehouse | Path, engine: SparkEngine, config: Config, full: bool = False,
                  now: datetime | None = None) -> RefreshResult:
    from pyspark.sql import functions as F

    now = clock.now(now)
    digest = settings_digest(config)
    start = time.perf_counter()
    warehouse = engine.warehouse
    with handle.of(where, "aggregate") as wh:
        warehouse.ensure()
        batches.recover(wh, warehouse, now)
        with wh.writing() as con:
            state = sqlfiles.run(con, "rollups/state").fetchone()
            stale = [(r, d.isoformat()) for r, d in sqlfiles.run(con, "spark/stale_days").fetchall()]
            archived = {(r, d.isoformat()) for r, d in sqlfiles.run(con, "archive/archived_event_days").fetchall()}
        full = full or state is None or state[1] != digest
        days = sorted(set(warehouse.partitions("events"))) if full else stale
        engine.refresh()  # every partition: the touched days may lie anywhere
        batch = new_batch_id()
        groups = 0
        clear: dict[str, set[tuple[str, ...]]] = {}
        if full:  # a rebuild drops every stored day, also the ones no event falls on any more, but the archived
            clear = {t: set(warehouse.partitions(t)) - archived for t in ROLLUP_TABLES}  # (docs/archive.md)
        if days:
            touched = engine.spark.createDataFrame([(r, date.fromisoformat(d)) for r, d in days],
                                                   "release STRING, day DATE")
            touched.createOrReplaceTempView("touched_days")
            touched.createOrReplaceTempView("chunk_days")  # DuckDB recomputes in chunks; Spark in one pass
            sqlfiles.view(engine, "rollups/chunk_rows", "chunk_rows")
            daily = warehouse.staged(batch, "rollup_daily", "replace")
            (engine.frame("rollups/insert_days", {"updated_at": now})
             .withColumn("date", F.date_format("day", "yyyy-MM-dd"))
             .write.partitionBy("release", "date").mode("overwrite").parquet(daily.path))
            groups = engine.spark.read.parquet(daily.path).count()
            log_gamma = {"log_gamma": sketch.log_gamma(config.engine.sketch_relative_error)}
            for table, relname, params in (("rollup_hist", "rollups/insert_hist_days", log_gamma),
                                           ("rollup_device_day", "rollups/insert_device_days", budget_params(config))):
                (engine.frame(relname, params)
                 .withColumn("date", F.date_format("day", "yyyy-MM-dd"))
                 .write.partitionBy("release", "date").mode("overwrite")
                 .parquet(warehouse.staged(batch, table, "replace").path))
            for table in ROLLUP_TABLES:
                clear.setdefault(table, set()).update(days)
        try:
            with wh.writing() as con, db.transaction(con):
                save_settings(con, config, digest, now)
                save_state(con, digest, now)
                batches.commit(con, batch, "rollup", clear, now)
        except BaseException:
            warehouse.discard(batch)
            raise
        batches.publish(wh, warehouse, batch, clear, now)
        engine.refresh()
    return RefreshResult(full, [(r, date.fromisoformat(d)) for r, d in days], groups, time.perf_counter() - start)
