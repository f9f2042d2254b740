"""Snapshots of the warehouse that readers read while a writer holds it (docs/writer-lock.md, "Snapshots").

DuckDB lets no process open a file another one holds read-write, so while the nightly job writes, `gate`,
`explain`, `state`, `drill`, `compare`, `history`, `runs` and the named queries over roll-ups read the newest
snapshot instead: a DuckDB file in `<db>.snapshots/<id>.duckdb` with every table of the warehouse but the raw
rows (RAW_TABLES: there with their columns and no rows) and every view, built by the writer while it holds the
writer lock and has the file closed (every transaction committed), so it is a consistent warehouse. Its size
and its cost follow the roll-ups, evaluations and rollout state, not the events (`bench/snapshots.py`).
Readers of raw rows (`pipeline sql` or `query` over events or quarantine, the report, `backtest`,
`gate --from-events`) read the warehouse file itself, which a writer holds only for one step at a time.

- publish: build `.tmp-<id>` beside them, fsync, chmod read-only, rename (atomic): a writer killed mid-build
  leaves only a temporary file, which the next publish removes; readers never see a partial snapshot.
- a writer publishes when its run lets go of the warehouse, and during a long run after a write at most every
  PUBLISH_EVERY_S seconds;
- the newest `PIPELINE_SNAPSHOTS` (default 2) are kept, older ones removed; a reader that opened one keeps
  reading it after removal (its open file lives on). 0 publishes none (readers then wait, as before).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from pipeline.common import clock
from pipeline.common.errors import UsageError
from pipeline.warehouse import sqlfiles

KEEP_ENV = "PIPELINE_SNAPSHOTS"
DEFAULT_KEEP = 2
PUBLISH_EVERY_S = 60.0
# tables that grow with traffic (pipeline/warehouse/archive.py moves their old days out): a snapshot has their
# columns, not their rows
RAW_TABLES = ("events", "quarantine")
# kept per (release, day) and recomputed together (pipeline/warehouse/aggregate.py), each refresh moving the days'
# rollup_day_versions: a snapshot takes the days that changed since the previous one
DAY_TABLES = ("rollup_daily", "rollup_hist", "rollup_device_day")
# a snapshot built from the previous one keeps the blocks of the rows it replaced: once it is this much larger
# than the last one built whole (recorded in WHOLE_SIZE_FILE beside them), the next one is built whole
# (bench/month.py: 141 MB after 45 nights built from the previous, 108 MB built whole)
GROWTH_LIMIT = 1.25
WHOLE_SIZE_FILE = ".whole-size"
# and the views over them
RAW_READERS = (*RAW_TABLES, "events_enriched", "all_events", "all_events_enriched", "all_quarantine")
_ID_FORMAT = "%Y%m%dT%H%M%S.%fZ"
# Tests only (the variable db.py's "checkpoint" fault reads too): "publish" stops a publish halfway through its
# build, so a test can kill it there.
FAULT_ENV = "PIPELINE_TEST_FAULT"


@dataclass(frozen=True)
class Snapshot:
    path: Path

    @property
    def id(self) -> str:
        return self.path.name.removesuffix(".duckdb")

    @property
    def published_at(self) -> datetime:
        return datetime.strptime(self.id, _ID_FORMAT)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "published_at": self.published_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "path": str(self.path)}

    def describe(self) -> str:
        return f"snapshot {self.id} (published {self.published_at:%Y-%m-%d %H:%M:%S} UTC)"


def reads_raw_rows(sql: str) -> bool:
    """Whether `sql` reads a raw table or a view over one (a snapshot has none of their rows); SQL DuckDB cannot
    parse counts as reading them (it goes to the warehouse file, whose error then says what is wrong)."""
    try:  # get_table_names cannot bind parameters: each $name stands for a NULL while the names are read
        names = duckdb.get_table_names(re.sub(r"\$[A-Za-z_]\w*", "NULL", sql))
    except duckdb.Error:
        return True
    return any(name.lower() in RAW_READERS for name in names)


def folder(db_path: Path) -> Path:
    return Path(f"{db_path}.snapshots")


def keep() -> int:
    raw = os.environ.get(KEEP_ENV)
    if not raw:
        return DEFAULT_KEEP
    if not raw.isdigit():
        raise UsageError(f"{KEEP_ENV}={raw!r} is not a whole number of snapshots to keep (0: none)")
    return int(raw)


def published(db_path: Path) -> list[Snapshot]:
    """The published snapshots, oldest first."""
    where = folder(db_path)
    if not where.is_dir():
        return []
    return [Snapshot(p) for p in sorted(where.glob("*.duckdb")) if not p.name.startswith(".")]


def newest(db_path: Path) -> Snapshot | None:
    found = published(db_path)
    return found[-1] if found else None


def publish(db_path: Path) -> Snapshot | None:
    """Copy the warehouse into a new snapshot. The caller holds the writer lock and no connection to the file."""
    kept = keep()
    if kept == 0 or not db_path.exists():
        return None
    where = folder(db_path)
    where.mkdir(exist_ok=True)
    for leftover in where.glob(".tmp-*"):  # a publish killed midway (and its WAL); only the lock holder publishes
        leftover.unlink(missing_ok=True)
    snapshot_id = clock.wall().strftime(_ID_FORMAT)
    final = where / f"{snapshot_id}.duckdb"
    tmp = where / f".tmp-{snapshot_id}"
    previous = newest(db_path)
    _build(db_path, tmp, previous.path if previous is not None else None)
    os.rename(tmp, final)
    _fsync(where)
    for old in published(db_path)[:-kept]:
        old.path.unlink(missing_ok=True)
        Path(f"{old.path}.wal").unlink(missing_ok=True)  # beside snapshots of earlier versions
    return Snapshot(final)


def _build(source: Path, target: Path, previous: Path | None) -> None:
    """A new DuckDB file at `target`: `source`'s tables (RAW_TABLES empty) and views, fsynced, read-only.
    From a copy of the `previous` snapshot when there is one with the same tables: then only the roll-ups of the
    days that changed since, and the small tables, are written. Reading `source` read-only also reads a WAL a
    failed checkpoint left beside it."""
    if previous is not None and previous.stat().st_size > GROWTH_LIMIT * _whole_size(previous.parent):
        previous = None  # built from scratch: the copy would carry the blocks of replaced rows on
    if previous is not None:
        shutil.copyfile(previous, target)
        os.chmod(target, 0o644)
    con = duckdb.connect(str(target))
    con.execute("SET enable_progress_bar = false")
    try:
        con.execute("ATTACH $path AS warehouse (READ_ONLY)", {"path": str(source)})
        if previous is None or not sqlfiles.run(con, "snapshots/columns").fetchall()[0][0]:
            _build_whole(con)
        else:
            _build_changes(con)
        for view in _names(con, "views", 1):  # re-created: a view's text may have changed with the package
            con.execute(f'DROP VIEW IF EXISTS main."{view}"')
        _create_views(con, _names(con, "views"))
        con.execute("DETACH warehouse")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    _fsync(target)
    os.chmod(target, 0o444)
    if previous is None:
        (target.parent / WHOLE_SIZE_FILE).write_text(str(target.stat().st_size))


def _whole_size(where: Path) -> float:
    """The size of the last snapshot built whole (0 when unknown: the next one is built whole)."""
    try:
        return float((where / WHOLE_SIZE_FILE).read_text())
    except (OSError, ValueError):
        return 0.0


# Table names below come from DuckDB's catalog, never from input: a name cannot be a bound parameter.

def _build_whole(con: duckdb.DuckDBPyConnection) -> None:
    """Every table copied anew (a previous snapshot's views are dropped and re-created by _build, after this;
    DuckDB drops a table a view reads)."""
    tables = _names(con, "tables")
    con.begin()  # one commit for them all: a commit per table was a sixth of a small warehouse's publish
    for table in tables:
        con.execute(f'DROP TABLE IF EXISTS main."{table}"')
        rows = " LIMIT 0" if table in RAW_TABLES else ""
        con.execute(f'CREATE TABLE main."{table}" AS SELECT * FROM warehouse.main."{table}"{rows}')
        if os.environ.get(FAULT_ENV) == "publish":
            con.commit()
            con.execute("CHECKPOINT")
            time.sleep(600)
    con.commit()


def _build_changes(con: duckdb.DuckDBPyConnection) -> None:
    """The previous snapshot brought up to date: the small tables whole, the roll-ups day by day."""
    con.begin()
    sqlfiles.run(con, "snapshots/changed_days")  # before rollup_day_versions is copied below
    for table in _names(con, "tables"):
        if table in RAW_TABLES or table in DAY_TABLES:
            continue
        con.execute(f'DELETE FROM main."{table}"')
        con.execute(f'INSERT INTO main."{table}" SELECT * FROM warehouse.main."{table}"')
    for table in DAY_TABLES:
        con.execute(f'DELETE FROM main."{table}" s USING changed_days c WHERE s.release = c.release AND s.day = c.day')
        con.execute(f'INSERT INTO main."{table}" SELECT w.* FROM warehouse.main."{table}" w '
                    "SEMI JOIN changed_days c ON w.release = c.release AND w.day = c.day")
    sqlfiles.run(con, "snapshots/dropped_device_days")  # archive.device_day_days: the warehouse dropped them
    con.commit()


def _names(con: duckdb.DuckDBPyConnection, what: str, column: int = 0) -> list[str]:
    """The warehouse's tables (sql/snapshots/tables.sql), or its views' CREATE statements (column 0) or names (1)."""
    return [r[column] for r in sqlfiles.run(con, f"snapshots/{what}").fetchall()]


def _create_views(con: duckdb.DuckDBPyConnection, statements: list[str]) -> None:
    """The views in an order that works: a view replaced later than the ones that read it (the warehouse
    re-creates settings_in_effect on each opening) is created before them."""
    while statements:
        failed = []
        for create in statements:
            try:
                con.execute(create)
            except duckdb.CatalogException:  # reads a view not created yet
                failed.append(create)
        if len(failed) == len(statements):
            con.execute(failed[0])  # none can be made: the first one's own error says why
        statements = failed


def _fsync(path: Path) -> None:
    """A file's bytes, or a folder's entries, on disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
