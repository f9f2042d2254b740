"""The Spark warehouse's raw partitions age out to the same Delta archive, under the same `archive:` settings, as
the DuckDB file's days (pipeline/warehouse/archive.py, docs/archive.md).

An `events/release=R/date=D/` partition (or `quarantine/date=D/`) older than its cutoff moves in the same steps:
its rows are written to the archive and read back with the same rows and checksum (computed by DuckDB over the
rows as the DuckDB warehouse would hold them, so both engines archive alike), the day is listed in the
bookkeeping file's `archived_days`, then its folder is deleted. A kill before the listing leaves the partition
where it was (the next run rewrites the archive's copy); a kill after it leaves a partition whose rows the
archive holds (the next run copies it again, the same rows, and deletes it). From the listing on, ingest on
Spark quarantines the day's late rows (`day_archived`), as on DuckDB, so a listed partition never grows.
`rollup_device_day` partitions older than `archive.device_day_days` are deleted. No Spark session is needed:
pyarrow reads and deletes the partitions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline.common import clock, stopping
from pipeline.common.config import Config
from pipeline.warehouse import archive, db, handle, sqlfiles
from pipeline.warehouse.archive import DEVICE_DAYS, EVENTS, QUARANTINE, STEM
from pipeline.warehouse.spark.storage import SparkTables

TABLES = {EVENTS: "events", QUARANTINE: "quarantine"}  # archive kind -> the Spark warehouse's table


def age_out_spark(where: handle.Warehouse | Path, tables: SparkTables, config: Config,
                  now: datetime | None = None) -> archive.ArchiveResult:
    """Move every due partition to the archive, oldest first; delete device-day rollup partitions past their
    retention. Idempotent: a second run finds nothing due."""
    now = clock.now(now)
    start = time.perf_counter()
    first_kept = archive.cutoffs(config, now.date())
    with handle.of(where, "archive") as wh:
        root = archive.location(wh.path, config)
        result = archive.ArchiveResult(root)
        for kind, table in TABLES.items():
            due = [(values, _day(values)) for values in tables.partitions(table) if _day(values) < first_kept[kind]]
            for values, day in sorted(due, key=lambda d: (d[1], d[0])):
                stopping.check()  # between days: each is whole in one place
                release = values[0] if kind == EVENTS else ""
                with _as_stored(kind, release, tables.read_partition(table, values)) as con:
                    moved = archive.copy_day(con, root, config, kind, release, day)
                with wh.writing() as con:
                    archive.record(con, moved, now)
                tables.drop_partition(table, values)
                result.moved.append(moved)
        for values in tables.partitions("rollup_device_day"):
            if _day(values) < first_kept[DEVICE_DAYS]:
                result.device_day_rows_dropped += tables.partition_rows("rollup_device_day", values)
                tables.drop_partition("rollup_device_day", values)
    result.archive_bytes = archive.local_bytes(root)
    result.warehouse_bytes = archive.warehouse_bytes(Path(wh.path)) + (archive.local_bytes(tables.root) or 0)
    result.seconds = time.perf_counter() - start
    return result


def _day(values: tuple[str, ...]) -> date:
    return date.fromisoformat(values[-1])  # `date` is every table's last partition column


@contextmanager
def _as_stored(kind: str, release: str, rows: pa.Table) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB warehouse holding one partition's rows in its own table (the same columns, types and
    order as the file's), so copy_day's SQL and checksum are those of a DuckDB day."""
    con = db.scratch()
    try:
        if kind == EVENTS:
            rows = rows.append_column("release", pa.array([release] * rows.num_rows, pa.string()))
        con.register("partition_rows", rows)
        sqlfiles.run(con, f"archive/load_{STEM[kind]}_partition")
        con.unregister("partition_rows")
        yield con
    finally:
        con.close()
