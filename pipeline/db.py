"""Connections to the DuckDB warehouse, and the one-writer lock.

DuckDB lets one process hold a database file read-write, and while it does no
other process can open it at all, not even read-only. So writers open the file
only while they write (one file's transaction at a time in ingest), and every
writer first takes `<db>.lock`, an flock held for the writer's whole run: the
kernel drops it when the holder dies, so a stale lock from a killed process is
taken over without any cleanup. The lock file's text names the holder (pid,
command, start time) for the "held by" message.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from pipeline import clock, sqlfiles
from pipeline.errors import DatabaseBusy, DatabaseError
from pipeline.schema import Schema, load_schema

DEFAULT_DB = "telemetry.duckdb"
# How long a connection waits for another process's brief hold on the file.
READ_WAIT_SECONDS = 30.0


def default_db_path() -> Path:
    return Path(os.environ.get("PIPELINE_DB") or DEFAULT_DB)


def events_ddl(schema: Schema) -> str:
    cols = ",\n    ".join(f"{c.name} {c.duckdb_type}" + ("" if c.nullable else " NOT NULL")
                          for c in schema.columns)
    qcols = ",\n    ".join(f"{c.name} {c.duckdb_type}" for c in schema.columns)
    return (
        f"CREATE TABLE IF NOT EXISTS events (\n    {cols},\n    file_id INTEGER NOT NULL\n);\n"
        f"CREATE TABLE IF NOT EXISTS quarantine (\n    {qcols},\n    file_id INTEGER NOT NULL,\n"
        "    source_file VARCHAR NOT NULL,\n    row_in_file BIGINT NOT NULL,\n    rules VARCHAR[] NOT NULL,\n"
        "    quarantined_at TIMESTAMP NOT NULL\n);"
    )


utcnow = clock.wall  # the lock's holder line is a wall-clock fact; judging times come from clock.now()


def _holder_from_duckdb(message: str) -> str:
    match = re.search(r"\(PID (\d+)\)", message)
    return f"PID {match.group(1)}" if match else "another process"


def _open(path: Path, read_only: bool, config: dict | None = None) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=read_only, config=config or {})
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise DatabaseBusy(
                f"database {path} is held by another writer ({_holder_from_duckdb(str(exc))}); "
                "try again when it finishes"
            ) from None
        raise DatabaseError(f"cannot open database {path}: {str(exc).splitlines()[0]}") from None
    except duckdb.Error as exc:
        raise DatabaseError(f"cannot open database {path}: {str(exc).splitlines()[0]}") from None


def _open_waiting(path: Path, read_only: bool, config: dict | None, wait: float) -> duckdb.DuckDBPyConnection:
    """Readers and the writer each hold the file briefly, so a busy file is retried for up to `wait` s."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return _open(path, read_only=read_only, config=config)
        except DatabaseBusy:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def connect_write(path: Path, wait: float = READ_WAIT_SECONDS) -> duckdb.DuckDBPyConnection:
    """A read-write connection with the warehouse tables in place. Callers hold writer_lock."""
    con = _open_waiting(path, read_only=False, config=None, wait=wait)
    try:
        con.execute(events_ddl(load_schema()))
        con.execute(sqlfiles.sql_file("ddl/tables").text)
        con.execute(sqlfiles.sql_file("ddl/derived").text)
    except BaseException:
        con.close()
        raise
    return con


@contextmanager
def writing(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect_write(path)
    try:
        yield con
    finally:
        con.close()


def connect_read(path: Path, sandbox: bool = False, wait: float = READ_WAIT_SECONDS) -> duckdb.DuckDBPyConnection:
    """A read-only connection. A writer holds the file only for one file's
    transaction at a time, so a busy file is retried for up to `wait` seconds.
    `sandbox` also cuts off files, extensions and settings (for ad hoc SQL)."""
    if not path.exists():
        raise DatabaseError(f"no database at {path}; create it with: pipeline ingest --db {path} PATH")
    config = {"enable_external_access": False, "autoload_known_extensions": False,
              "autoinstall_known_extensions": False} if sandbox else None
    con = _open_waiting(path, read_only=True, config=config, wait=wait)
    if sandbox:
        con.execute("SET lock_configuration = true")
    return con


@contextmanager
def reading(path: Path, sandbox: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect_read(path, sandbox=sandbox)
    try:
        yield con
    finally:
        con.close()


_held: set[Path] = set()  # locks this process holds: nested steps of one run share them


@contextmanager
def holder_lock(lock_path: Path, command: str, busy: str) -> Iterator[None]:
    """An flock on `lock_path` whose text names its holder; DatabaseBusy(busy + holder) when taken."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DatabaseBusy(f"{busy} ({_describe_holder(lock_path)}); try again when it finishes") from None
        os.ftruncate(fd, 0)
        holder = {"pid": os.getpid(), "command": command, "started_at": utcnow().isoformat(timespec="seconds")}
        os.write(fd, json.dumps(holder).encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def writer_lock(path: Path, command: str) -> Iterator[None]:
    """Hold `<db>.lock` for a whole writing run; nested steps of the run share it."""
    key = path.resolve()
    if key in _held:
        yield
        return
    with holder_lock(Path(f"{path}.lock"), command, f"database {path} is held by another writer"):
        _held.add(key)
        try:
            yield
        finally:
            _held.discard(key)


def _describe_holder(lock_path: Path) -> str:
    try:
        holder = json.loads(lock_path.read_text() or "{}")
    except (OSError, ValueError):
        holder = {}
    if not holder:
        return "another process"
    return f"pid {holder.get('pid')}, `pipeline {holder.get('command')}` since {holder.get('started_at')} UTC"
