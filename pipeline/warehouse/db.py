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
import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb

from pipeline.common import clock
from pipeline.common.errors import DatabaseBusy, DatabaseError, UsageError, first_line
from pipeline.warehouse import runs, snapshots, sqlfiles
from pipeline.warehouse.schema import Schema, load_schema

T = TypeVar("T")

DEFAULT_DB = "telemetry.duckdb"
# How long a connection waits for another process's brief hold on the file:
# --busy-timeout, else $PIPELINE_BUSY_TIMEOUT, else this.
DEFAULT_BUSY_TIMEOUT_S = 30.0
BUSY_TIMEOUT_ENV = "PIPELINE_BUSY_TIMEOUT"
_busy_timeout: float | None = None
# Tests only: "checkpoint" makes the next commit's checkpoint fail inside DuckDB (a crash in the commit).
FAULT_ENV = snapshots.FAULT_ENV


def default_db_path() -> Path:
    return Path(os.environ.get("PIPELINE_DB") or DEFAULT_DB)


def set_busy_timeout(seconds: float | None) -> None:
    global _busy_timeout
    _busy_timeout = seconds


def busy_timeout() -> float:
    if _busy_timeout is not None:
        return _busy_timeout
    return env_seconds(BUSY_TIMEOUT_ENV, DEFAULT_BUSY_TIMEOUT_S)


def env_seconds(name: str, default: float, zero: str = "") -> float:
    """A duration in seconds from the environment variable `name` (unset or empty: `default`);
    `zero` says what 0 means, for the message."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not a number of seconds") from None
    if value < 0:
        raise UsageError(f"{name}={raw!r} must be >= 0" + (f" ({zero})" if zero else ""))
    return value


def require_folder(path: Path) -> None:
    """A writer creates a new database file only inside an existing folder: a typo must not start a warehouse."""
    if not path.exists() and not path.parent.is_dir():
        raise UsageError(f"--db {path}: folder {path.parent} does not exist; "
                         f"to start a new warehouse there run: pipeline init --db {path}")


def init_warehouse(path: Path) -> bool:
    """Create the database (and its folders) with every table; False when it already existed."""
    existed = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with writer_lock(path, "init"):
        with writing(path):
            pass
        if snapshots.newest(path):  # readers of snapshots made before an upgrade read the tables as they are now
            snapshots.publish(path)
    return not existed


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


def _opening(path: Path, open_: Callable[[], T]) -> T:
    """`open_()` (a connect or an ATTACH of `path`), DuckDB's errors as one line naming the database; a
    file another process holds is DatabaseBusy."""
    try:
        return open_()
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise DatabaseBusy(
                f"database {path} is held by another writer ({_holder_from_duckdb(str(exc))}); "
                "try again when it finishes"
            ) from None
        raise DatabaseError(f"cannot open database {path}: {first_line(exc)}") from None
    except duckdb.Error as exc:
        raise DatabaseError(f"cannot open database {path}: {first_line(exc)}") from None


def _open(path: Path, read_only: bool, config: dict | None = None) -> duckdb.DuckDBPyConnection:
    con = _opening(path, lambda: duckdb.connect(str(path), read_only=read_only, config=config or {}))
    con.execute("SET enable_progress_bar = false")  # a query over 2 s would draw one on stderr: a CI log's noise
    return con


def _waiting(open_: Callable[[], T], wait: float | None) -> T:
    """Readers and the writer each hold the file briefly, so a busy file is retried for up to `wait` s."""
    wait = busy_timeout() if wait is None else wait
    deadline = time.monotonic() + wait
    while True:
        try:
            return open_()
        except DatabaseBusy as exc:
            if time.monotonic() >= deadline:
                raise DatabaseBusy(f"{str(exc).removesuffix('; try again when it finishes')}; waited {wait:g} s; "
                                   f"try again when it finishes, or wait longer with --busy-timeout SECONDS "
                                   f"(or {BUSY_TIMEOUT_ENV})") from None
            time.sleep(0.05)


def _open_waiting(path: Path, read_only: bool, config: dict | None,
                  wait: float | None) -> duckdb.DuckDBPyConnection:
    return _waiting(lambda: _open(path, read_only, config), wait)


@functools.cache
def _ddl() -> tuple[tuple[str, ...], str]:
    """The statements that make the warehouse's tables and views, and their digest."""
    texts = (events_ddl(load_schema()), sqlfiles.sql_file("ddl/tables").text, sqlfiles.sql_file("ddl/derived").text)
    return texts, hashlib.sha256("\n".join(texts).encode()).hexdigest()


def _create_tables(con: duckdb.DuckDBPyConnection, prepare: bool = True) -> None:
    """The warehouse tables and views, in the connection's default database, unless this package's DDL was the
    last applied there (run again, its views' CREATE OR REPLACE alone made every writer's close a checkpoint);
    `prepare` False: a run's handle did that when it first opened the file (pipeline/warehouse/handle.py)."""
    if prepare:
        texts, digest = _ddl()
        if _applied_ddl(con) != digest:
            for text in texts:
                con.execute(text)
            sqlfiles.run(con, "ddl/record_digest", {"digest": digest})
        runs.mark_aborted(con, utcnow())  # a writer opening the warehouse settles the runs whose process died
    if os.environ.get(FAULT_ENV) == "checkpoint":
        con.execute("SET checkpoint_threshold = '1b'")
        con.execute("SET debug_checkpoint_abort = 'before_header'")


def _applied_ddl(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        rows = sqlfiles.run(con, "ddl/applied_digest").fetchall()
    except duckdb.CatalogException:  # a new warehouse, or one made before the digest was kept
        return None
    return rows[0][0] if rows else None


def scratch(threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse with every table and view: simulations and backtests judge data there
    without touching a file. `threads`: DuckDB's, when several run side by side."""
    con = duckdb.connect(":memory:", config={"threads": threads} if threads else {})
    con.execute("SET enable_progress_bar = false")
    _create_tables(con)
    return con


def connect_write(path: Path, wait: float | None = None, prepare: bool = True) -> duckdb.DuckDBPyConnection:
    """A read-write connection with the warehouse tables in place (`prepare`: put them there). Callers hold
    writer_lock."""
    require_folder(path)
    con = _open_waiting(path, read_only=False, config=None, wait=wait)
    try:
        _create_tables(con, prepare)
    except BaseException:
        con.close()
        raise
    return con


WAREHOUSE = "warehouse"  # the catalog name of a warehouse attached by `attached`


@contextmanager
def attached(con: duckdb.DuckDBPyConnection, path: Path, wait: float | None = None,
             prepare: bool = True) -> Iterator[None]:
    """The warehouse at `path` attached read-write to `con` (a connection to another database, such
    as ingest's in-memory staging one) as its default database, with the tables in place; detached
    on leaving, which frees the file for readers. Waits for another process's brief hold like
    connect_write. Callers hold writer_lock."""
    require_folder(path)
    _waiting(lambda: _opening(path, lambda: con.execute(f"ATTACH $path AS {WAREHOUSE}", {"path": str(path)})), wait)
    home = con.execute("SELECT current_database()").fetchone()[0]
    try:
        con.execute(f"USE {WAREHOUSE}")
        _create_tables(con, prepare)
        yield
    except BaseException:
        try:  # the database may have failed under the body: the exception in flight says why
            con.execute(f"USE {home}")
            con.execute(f"DETACH {WAREHOUSE}")
        except duckdb.Error:
            pass
        raise
    con.execute(f"USE {home}")
    con.execute(f"DETACH {WAREHOUSE}")  # checkpoints the file and closes it


_ERROR_PREFIX = re.compile(r"^(?:[A-Z][A-Za-z]* )*Error: ")


def error_text(exc: duckdb.Error) -> str:
    """DuckDB's message without its "Invalid Input Error: "-style prefix, first line only."""
    text = first_line(exc)
    while _ERROR_PREFIX.match(text):
        text = _ERROR_PREFIX.sub("", text, count=1)
    return text


def storage_failure(path: Path, exc: BaseException) -> str | None:
    """One line naming the database and the root cause when `exc` comes from DuckDB failing to store
    (a crash in the commit, a full disk, a file size limit), else None. The root is the first DuckDB
    error of the chain: a later one (a rollback after a failed commit) only hides it."""
    root = None
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, duckdb.Error):
            root = seen
        seen = seen.__cause__ or seen.__context__
    if root is None:
        return None
    text = " ".join(str(root).split())
    original = re.search(r'Original error: "(.*)"', text)
    cause = original.group(1) if original else text
    # an attached warehouse (ingest's) words a failed checkpoint as the failure of that database
    failed = re.search(r'Checkpoint failed for database "[^"]*"\. The database has been invalidated\. '
                       r"Original error: (.*)", text)
    if failed:
        cause = f"Failed to create checkpoint because of error: {failed.group(1)}"
    while _ERROR_PREFIX.match(cause):
        cause = _ERROR_PREFIX.sub("", cause, count=1)
    if isinstance(root, duckdb.FatalException) or original or failed:
        return (f"database {path} failed and DuckDB closed it: {cause}; "
                "what was committed is kept, run the command again to finish")
    if isinstance(root, duckdb.IOException) or "Failed to commit" in text:
        return f"database {path}: could not store the changes: {cause}; nothing of the transaction in flight was kept"
    return None


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """BEGIN ... COMMIT. A failed body rolls back; a failed COMMIT is not rolled back: DuckDB has already
    ended it (or invalidated the database), and a ROLLBACK then would only replace the real cause."""
    con.begin()
    try:
        yield
    except BaseException as exc:
        if not isinstance(exc, duckdb.FatalException):
            try:
                con.rollback()
            except duckdb.Error:
                pass  # the database failed under the body; `exc` says why
        raise
    con.commit()


@contextmanager
def writing(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect_write(path)
    try:
        yield con
    finally:
        con.close()


# A cross join of two huge ranges spills without end: uncapped, it filled 70 GB of free disk in seconds here.
SANDBOX_TEMP_LIMIT = "2GB"


# per warehouse: what this command reads (one_source): None for the file itself, else the snapshot and who
# held the warehouse then, for the message
_chosen: dict[Path, tuple[snapshots.Snapshot, str] | None] = {}
_pinned = False


@contextmanager
def one_source() -> Iterator[None]:
    """Within it (one CLI command), every read of a warehouse reads what the first one chose: the file
    itself, or the snapshot it found when another process held the file; never a mix of both."""
    global _pinned
    _chosen.clear()
    _pinned = True
    try:
        yield
    finally:
        _pinned = False


def served() -> list[tuple[snapshots.Snapshot, str]]:
    """The snapshots this command read instead of a held warehouse, each with who held the warehouse."""
    return [chosen for chosen in _chosen.values() if chosen is not None]


def served_dict(path: Path) -> dict | None:
    """What `path`'s readers read: None for the warehouse itself, else the snapshot's id, time and path."""
    chosen = _chosen.get(path.resolve())
    return chosen[0].to_dict() if chosen else None


def held_by_another(path: Path) -> bool:
    """True when another process holds the writer lock (a probe: a shared flock taken and dropped at once;
    writers wait PROBE_GRACE_S for it)."""
    try:
        fd = os.open(f"{path}.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock
    return False


def _read_target(path: Path, raw: bool = False,
                 prefer_snapshot: bool = False) -> tuple[Path, snapshots.Snapshot | None]:
    """The file a reader opens: the warehouse, or its newest snapshot while another process writes it; `raw`
    (the reader needs raw rows, which snapshots do not hold): the warehouse, between the writer's steps;
    `prefer_snapshot` (a long-lived reader, pipeline serve): the newest snapshot whenever there is one, chosen
    anew at each read, so the reader never holds the file a writer is about to open."""
    key = path.resolve()
    if raw:
        return path, None
    if prefer_snapshot:
        newest = snapshots.newest(path)
        return (newest.path, newest) if newest else (path, None)
    if _pinned and key in _chosen:
        chosen = _chosen[key]
    else:
        newest = snapshots.newest(path) if key not in _held and held_by_another(path) else None
        chosen = (newest, holder_text(path)) if newest else None
        if _pinned:
            _chosen[key] = chosen
    return (chosen[0].path, chosen[0]) if chosen else (path, None)


def connect_read(path: Path, sandbox: bool = False, wait: float | None = None,
                 raw: bool = False, prefer_snapshot: bool = False) -> duckdb.DuckDBPyConnection:
    """A read-only connection. While another process holds the writer lock it reads the newest snapshot
    (pipeline/warehouse/snapshots.py), unless `raw` (it reads raw rows); otherwise, or with no snapshot yet, a
    busy file is retried for up to `wait` seconds (default: busy_timeout()). `sandbox` also cuts off files,
    extensions and settings (for ad hoc SQL)."""
    if not path.exists():
        raise DatabaseError(f"no database at {path}; create it with: pipeline ingest --db {path} PATH")
    config = {"enable_external_access": False, "autoload_known_extensions": False,
              "autoinstall_known_extensions": False,
              "max_temp_directory_size": SANDBOX_TEMP_LIMIT} if sandbox else None
    target, snapshot = _read_target(path, raw, prefer_snapshot)
    if snapshot is None:
        con = _open_waiting(path, read_only=True, config=config, wait=wait)
    else:
        try:
            con = _open(target, read_only=True, config=config)
        except DatabaseError:  # removed by a newer publish between the listing and the opening
            _chosen.pop(path.resolve(), None)
            target, _ = _read_target(path, prefer_snapshot=prefer_snapshot)
            con = _open(target, read_only=True, config=config)
        if _applied_ddl(con) != _ddl()[1]:  # made before an upgrade: the file itself may be up to date
            con.close()
            _chosen[path.resolve()] = None
            con = _open_waiting(path, read_only=True, config=config, wait=wait)
    if _applied_ddl(con) != _ddl()[1]:
        con.close()
        raise DatabaseError(f"database {path} was written by another version of pipeline: its tables are not "
                            f"this version's; bring them up to date with: pipeline init --db {path}")
    if sandbox:
        con.execute("SET lock_configuration = true")
    return con


@contextmanager
def reading(path: Path, sandbox: bool = False, raw: bool = False,
            prefer_snapshot: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect_read(path, sandbox=sandbox, raw=raw, prefer_snapshot=prefer_snapshot)
    try:
        yield con
    except BaseException:
        try:
            con.close()
        except duckdb.Error:  # an interrupted query still winding down: the exception in flight says why
            pass
        raise
    con.close()


_held: set[Path] = set()  # locks this process holds: nested steps of one run share them
PROBE_GRACE_S = 0.2
# commands that hold the writer lock for seconds (a gate recording its evaluation, a rollout action): a run
# starting then waits for them, up to the busy timeout, instead of being told at once
BRIEF_HOLDERS = ("gate", "rollout")


@contextmanager
def holder_lock(lock_path: Path, command: str, busy: str, wait: float = 0.0) -> Iterator[None]:
    """An flock on `lock_path` whose text names its holder; DatabaseBusy(busy + holder) when still
    taken after `wait` seconds (up to the busy timeout while the holder is a BRIEF_HOLDERS command)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        start = time.monotonic()
        deadline = start + max(wait, PROBE_GRACE_S)  # a reader's probe holds it for microseconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline and _holder(lock_path).get("command") in BRIEF_HOLDERS:
                    deadline = max(deadline, start + busy_timeout())
                if time.monotonic() >= deadline:
                    waited = f"; waited {wait:g} s" if wait else ""
                    raise DatabaseBusy(f"{busy} ({_describe_holder(lock_path)}){waited}; "
                                       "try again when it finishes") from None
                time.sleep(0.05)
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
def writer_lock(path: Path, command: str, wait: float = 0.0) -> Iterator[None]:
    """Hold `<db>.lock` for a whole writing run; nested steps of the run share it. A new run does not
    wait (`wait` 0: a second writer is told at once); a run taking the lock back after it let go does."""
    key = path.resolve()
    if key in _held:
        yield
        return
    require_folder(path)
    with holder_lock(Path(f"{path}.lock"), command, f"database {path} is held by another writer", wait):
        _held.add(key)
        try:
            yield
        finally:
            _held.discard(key)


def holder_text(path: Path) -> str:
    """Who holds the writer lock of the warehouse at `path`, for a message."""
    return _describe_holder(Path(f"{path}.lock"))


def _holder(lock_path: Path) -> dict:
    try:
        holder = json.loads(lock_path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe_holder(lock_path: Path) -> str:
    holder = _holder(lock_path)
    if not holder:
        return "another process"
    return f"pid {holder.get('pid')}, `pipeline {holder.get('command')}` since {holder.get('started_at')} UTC"
