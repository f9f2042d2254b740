"""Raw rows age out of the DuckDB file into the archive: Delta Lake tables that other tools read.

The gate reads rollups (docs/how-the-gate-decides.md), so raw events are kept in the file only for
`archive.raw_events_days` whole days (the window, the late-data lag and recent days for analysts), and
quarantined rows for `archive.quarantine_days`; older ones move to two Delta tables under
`archive.location` (default `<db>.archive/`, or `s3://bucket/prefix` or `az://container/prefix`):

- `events/`, partitioned by release and day (every contract column, `file_id`, and `day`);
- `quarantine/`, partitioned by `quarantined_day` (every quarantined row with its rules).

A day moves in three steps, each safe to stop after (docs/archive.md):

1. its rows are written to the archive, replacing that partition (a Delta commit: atomic, and idempotent when
   the move is run again);
2. the archive's copy is read back and compared with the file's: the same rows and the same checksum (the sum
   of DuckDB's hash of every column of every row), else the move stops and the day stays in the file;
3. in one DuckDB transaction, the day is listed in `archived_days` (rows, checksum, Delta version) and
   deleted from the file.

Readers take an archived day from the archive only when `archived_days` lists it (sql/archive/all_events.sql),
so a day stopped between 1 and 3 is counted once, from the file, and the next run finishes its move. Late rows
of an archived day are quarantined by ingest with the rule `day_archived` (the day's rollups are final).

The gate's device-day rollup keeps `archive.device_day_days` days; rollup_daily, rollup_hist, evaluations,
rollout state and the files ledger stay (they grow with releases and days, not with events).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipeline.common import clock, stopping
from pipeline.common.config import Config, s3_endpoint
from pipeline.common.errors import PipelineError, first_line
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.warehouse import db, handle, sqlfiles
from pipeline.warehouse.handle import Warehouse

EVENTS = "events"
QUARANTINE = "quarantine"
# the archive's tables: (partition columns, the temp name DuckDB reads the table under)
TABLES = {EVENTS: (["release", "day"], "archived_events"),
          QUARANTINE: (["quarantined_day"], "archived_quarantine")}
STEM = {EVENTS: "event", QUARANTINE: "quarantine"}  # sql/archive/<stem>_day.sql and the others
DEVICE_DAYS = "device_days"  # the gate's device-day rollup: dropped (not archived) after archive.device_day_days
# Tests only: "archive-written" / "archive-verified" stop a move after that step, so a test can kill it there
FAULT_ENV = db.FAULT_ENV


class ArchiveError(PipelineError):
    """The archive's copy of a day differs from the file's: the day stays in the file."""


@dataclass(frozen=True)
class MovedDay:
    kind: str  # events | quarantine
    release: str  # '' for quarantine
    day: date
    rows: int
    checksum: str
    table_version: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "release": self.release, "day": self.day.isoformat(), "rows": self.rows,
                "checksum": self.checksum, "table_version": self.table_version}


@dataclass
class ArchiveResult:
    location: str
    moved: list[MovedDay] = field(default_factory=list)
    device_day_rows_dropped: int = 0
    archive_bytes: int | None = None  # None: not measured (an object store)
    warehouse_bytes: int = 0
    seconds: float = 0.0

    def rows(self, kind: str) -> int:
        return sum(m.rows for m in self.moved if m.kind == kind)

    def days(self, kind: str) -> int:
        return sum(1 for m in self.moved if m.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "location": self.location, "event_days_moved": self.days(EVENTS),
                "event_rows_moved": self.rows(EVENTS), "quarantine_days_moved": self.days(QUARANTINE),
                "quarantine_rows_moved": self.rows(QUARANTINE),
                "device_day_rows_dropped": self.device_day_rows_dropped, "archive_bytes": self.archive_bytes,
                "warehouse_bytes": self.warehouse_bytes, "seconds": round(self.seconds, 3),
                "moved": [m.to_dict() for m in self.moved]}

    def __str__(self) -> str:
        size = f"; archive {_mb(self.archive_bytes)}" if self.archive_bytes is not None else ""
        if not self.moved and not self.device_day_rows_dropped:
            return f"archive: nothing to move ({self.location}{size}; warehouse {_mb(self.warehouse_bytes)})"
        return (f"archive: moved {self.rows(EVENTS):,} events of {self.days(EVENTS)} release-days and "
                f"{self.rows(QUARANTINE):,} quarantined rows of {self.days(QUARANTINE)} days to {self.location}; "
                f"dropped {self.device_day_rows_dropped:,} device-day rollup rows{size}; "
                f"warehouse {_mb(self.warehouse_bytes)} ({self.seconds:.2f} s)")


def _mb(n: int | None) -> str:
    return f"{(n or 0) / 1e6:,.1f} MB"


def location(db_path: Path, config: Config) -> str:
    return config.archive.location or f"{db_path}.archive"


def table_uri(root: str, kind: str) -> str:
    return f"{root.rstrip('/')}/{kind}"


def storage_options(root: str, config: Config) -> dict[str, str] | None:
    """delta-rs's options for an archive in a bucket. s3://: the landing's endpoint and region (credentials come
    from the environment as for every AWS tool), and conditional puts so two writers never overwrite a commit.
    az:// (abfs[s]://): the account, key and blob endpoint of AZURE_STORAGE_CONNECTION_STRING, as an az://
    landing reads it; else delta-rs finds AZURE_STORAGE_ACCOUNT_NAME and a service principal, managed identity
    or `az login` itself, at the landing's endpoint when one is set (Azure's commits are conditional already)."""
    if root.startswith(("az://", "abfs://", "abfss://")):
        return _azure_options(config.landing.endpoint_url)
    if not root.startswith("s3://"):
        return None
    options = {"aws_conditional_put": "etag"}
    endpoint = s3_endpoint(config.landing.endpoint_url)
    if endpoint:
        options["aws_endpoint_url"] = endpoint
        if endpoint.startswith("http://"):
            options["aws_allow_http"] = "true"
    region = config.landing.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["aws_region"] = region
    return options


AZURE_CONNECTION_KEYS = {"AccountName": "azure_storage_account_name", "AccountKey": "azure_storage_account_key",
                         "SharedAccessSignature": "azure_storage_sas_key", "BlobEndpoint": "azure_storage_endpoint"}


def _azure_options(endpoint: str) -> dict[str, str]:
    parts = dict(p.split("=", 1) for p in os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "").split(";") if "=" in p)
    options = {AZURE_CONNECTION_KEYS[k]: v for k, v in parts.items() if k in AZURE_CONNECTION_KEYS}
    if endpoint and "azure_storage_endpoint" not in options:
        options["azure_storage_endpoint"] = endpoint
    if options.get("azure_storage_endpoint", "").startswith("http://"):
        options["allow_http"] = "true"
    return options


@contextmanager
def _storing(uri: str) -> Iterator[None]:
    """delta-rs's and the store's errors (unreachable, denied, a conflicting writer) as one line naming the table."""
    from deltalake.exceptions import DeltaError

    try:
        yield
    except (DeltaError, OSError) as exc:
        raise ArchiveError(f"archive {uri}: {first_line(exc)}") from None


def _delta_table(root: str, kind: str, config: Config) -> Any | None:
    """The archive's Delta table of `kind`, or None before its first day moved."""
    from deltalake import DeltaTable

    uri = table_uri(root, kind)
    options = storage_options(root, config)
    with _storing(uri):
        if not DeltaTable.is_deltatable(uri, storage_options=options):
            return None
        return DeltaTable(uri, storage_options=options)


def _empty(con: duckdb.DuckDBPyConnection, kind: str) -> pa.Table:
    """A table with the archive's columns and no rows, for a connection to read before anything moved."""
    name = "archive/event_day" if kind == EVENTS else "archive/quarantine_day"
    params = {"release": "", "day": date(1, 1, 1)} if kind == EVENTS else {"day": date(1, 1, 1)}
    return sqlfiles.arrow(con, name, params)


def register(con: duckdb.DuckDBPyConnection, db_path: Path, config: Config) -> None:
    """The archive's tables in `con` as archived_events and archived_quarantine, and the views all_events and
    all_quarantine (the file's rows and the archived days as one relation each) and all_events_enriched."""
    root = location(db_path, config)
    for kind, (_, name) in TABLES.items():
        table = _delta_table(root, kind, config)
        con.register(name, table.to_pyarrow_dataset() if table is not None else _empty(con, kind))
    sqlfiles.run(con, "archive/all_events")
    con.execute(_all_days_enriched())


def _all_days_enriched() -> str:
    """The temp view all_events_enriched: sql/ddl/derived.sql's events_enriched (where the contract's derived
    fields are defined, once) over all_events instead of events, for the named queries over raw rows."""
    text = sqlfiles.sql_file("ddl/derived").text
    head = "CREATE OR REPLACE VIEW events_enriched AS"
    start = text.index(head) + len(head)
    body = text[start:text.index(";", start)]
    source = "FROM events e "
    if body.count(source) != 1:
        raise RuntimeError(f"sql/ddl/derived.sql: events_enriched no longer reads {source.strip()!r} once")
    return ("CREATE OR REPLACE TEMP VIEW all_events_enriched AS"
            + body.replace(source, "FROM (SELECT * EXCLUDE (day) FROM all_events) e "))


def _fault(step: str) -> None:
    if os.environ.get(FAULT_ENV) == f"archive-{step}":
        print(f"test fault: the move stopped after it was {step}", file=sys.stderr, flush=True)
        time.sleep(600)


def _predicate(kind: str, release: str, day: date) -> str:
    """delta-rs's replaceWhere predicate for one day's partition (a release is quoted as an SQL string)."""
    if kind == QUARANTINE:
        return f"quarantined_day = '{day.isoformat()}'"
    return "release = '" + release.replace("'", "''") + f"' AND day = '{day.isoformat()}'"


def _move_day(con: duckdb.DuckDBPyConnection, root: str, config: Config, kind: str, release: str, day: date,
              now: datetime) -> MovedDay:
    moved = copy_day(con, root, config, kind, release, day)
    params = _day_params(kind, release, day)
    with db.transaction(con):
        record(con, moved, now)
        deleted = sqlfiles.run(con, f"archive/delete_{STEM[kind]}_day", params).fetchall()[0][0]
        if deleted != moved.rows:  # rolls back: a writer added rows between the read and the delete
            raise ArchiveError(f"{_what(kind, release, day)}: {deleted} rows to delete where {moved.rows} were "
                               "archived")
    return moved


def _day_params(kind: str, release: str, day: date) -> dict[str, Any]:
    """The bound parameters of sql/archive/<stem>_day*.sql for one day."""
    return {"release": release, "day": day} if kind == EVENTS else {"day": day}


def _what(kind: str, release: str, day: date) -> str:
    return f"{kind} of {release} {day}" if release else f"{kind} of {day}"


def copy_day(con: duckdb.DuckDBPyConnection, root: str, config: Config, kind: str, release: str,
             day: date) -> MovedDay:
    """Steps 1 and 2 of a move: the day's rows of `con`'s events (or quarantine) table written to the archive,
    replacing its partition, and read back with the same rows and checksum, else ArchiveError."""
    from deltalake import write_deltalake

    partition_by, name = TABLES[kind]
    params = _day_params(kind, release, day)
    rows = sqlfiles.arrow(con, f"archive/{STEM[kind]}_day", params)
    live = sqlfiles.run(con, f"archive/{STEM[kind]}_day_checksum", params).fetchall()[0]
    options = storage_options(root, config)
    with _storing(table_uri(root, kind)):
        write_deltalake(table_uri(root, kind), rows, partition_by=partition_by, mode="overwrite",
                        predicate=_predicate(kind, release, day), schema_mode="merge", storage_options=options)
    _fault("written")
    table = _delta_table(root, kind, config)
    with _storing(table_uri(root, kind)):
        con.register(name, table.to_pyarrow_dataset())
        try:
            archived = sqlfiles.run(con, f"archive/archived_{STEM[kind]}_day_checksum", params).fetchall()[0]
        finally:
            con.unregister(name)
    if tuple(archived) != tuple(live):
        raise ArchiveError(f"archive {table_uri(root, kind)}: {_what(kind, release, day)} reads back as "
                           f"{archived[0]} rows (checksum {archived[1]}) where the warehouse holds {live[0]} "
                           f"(checksum {live[1]}); the day stays where it was")
    _fault("verified")
    return MovedDay(kind, release, day, int(live[0]), str(live[1]), int(table.version()))


def record(con: duckdb.DuckDBPyConnection, moved: MovedDay, now: datetime) -> None:
    """Step 3's listing: from here on readers take the day from the archive, and ingest quarantines its late rows."""
    sqlfiles.run(con, "archive/record_day", {**moved.to_dict(), "day": moved.day, "archived_at": now})


def cutoffs(config: Config, today: date) -> dict[str, date]:
    """The first day each kind keeps (earlier days move), and the device-day rollup's (DEVICE_DAYS)."""
    return {EVENTS: today - timedelta(days=config.archive.raw_events_days),
            QUARANTINE: today - timedelta(days=config.archive.quarantine_days),
            DEVICE_DAYS: today - timedelta(days=config.archive.device_day_days)}


def age_out(warehouse: Warehouse | Path, config: Config, now: datetime | None = None) -> ArchiveResult:
    """Move every due day to the archive, one day per transaction, oldest first; drop device-day rollup rows
    older than archive.device_day_days. Idempotent: a second run finds nothing due."""
    now = clock.now(now)
    start = time.perf_counter()
    first_kept = cutoffs(config, now.date())
    with handle.of(warehouse, "archive") as wh:
        root = location(wh.path, config)
        result = ArchiveResult(root)
        with wh.writing() as con:  # one opening when nothing is due
            due = {kind: sqlfiles.run(con, f"archive/due_{STEM[kind]}_days",
                                      {"cutoff": first_kept[kind]}).fetchall() for kind in TABLES}
            result.device_day_rows_dropped = sqlfiles.run(con, "archive/drop_device_days",
                                                          {"cutoff": first_kept[DEVICE_DAYS]}).fetchall()[0][0]
        for kind, days in due.items():
            for release, day, _ in days:
                stopping.check()  # between days: each is whole in one place
                with wh.writing() as con:
                    result.moved.append(_move_day(con, root, config, kind, release, day, now))
    result.archive_bytes = local_bytes(root)
    result.warehouse_bytes = warehouse_bytes(Path(wh.path))
    result.seconds = time.perf_counter() - start
    return result


def local_bytes(location: str) -> int | None:
    """A folder's size on local disk; None for a location on an object store (not measured)."""
    return folder_bytes(Path(location)) if "://" not in location else None


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def warehouse_bytes(db_path: Path) -> int:
    """The DuckDB file, its WAL and its snapshots."""
    wal = Path(f"{db_path}.wal")
    return sum(p.stat().st_size for p in (db_path, wal) if p.exists()) + folder_bytes(Path(f"{db_path}.snapshots"))
