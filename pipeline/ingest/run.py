"""`pipeline ingest`: landed Parquet -> validated, deduplicated rows in DuckDB.

Per file, in order:
1. content hash: a file whose sha256 is already loaded (any name) is skipped;
2. read the whole file (a readable footer proves nothing) and cast each contract
   column; a missing required column or an uncastable one rejects the file
   (reading.py);
3. Great Expectations checks every row rule (validate.py), on the rows staged in
   DuckDB;
4. one transaction per batch of files: their manifest rows, quarantined rows with
   the rules they broke, new valid rows, GX's per-rule results (a transaction per
   file when copies of an event_id compete). A kill leaves each file wholly in or out.

A file rejected for its bytes is remembered by its sha256 too: a rerun lists it
again without reading it or adding a manifest row.

A row that breaks a rule is quarantined even when its event_id is already
stored: validity is decided first, then only valid rows are deduplicated. Of
the valid copies of an event_id the one with the earliest event_time wins, then
the smallest content hash (sql/ingest/rank_copies.sql), so the stored rows do
not depend on the order files arrive in. A later copy that wins replaces the
stored one; the file that held it counts that row as a duplicate from then on.
Copies are looked for once per batch: within the run by the staging thread (collisions_in_run.sql), among
the rows stored before the run by the storing thread (find_collisions.sql).

Three threads share the work, so the files' reading and validation overlap the
storing (DuckDB stores on about one core):
- checking (reading.check, in the worker processes of isolated.py): hashes each
  file and decodes it whole, pages checked, ahead of the others; a reader that
  crashes, hangs or runs out of memory rejects its file, not the run;
- staging: reads a batch of whole files into DuckDB (`stage.batch`), cast to the
  contract, and has Great Expectations validate it;
- the caller's thread: stores the previous batch, and is the only one that
  writes the warehouse.
"""

from __future__ import annotations

import importlib
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import accumulate
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from pipeline.common import clock, stopping
from pipeline.common.config import LandingSettings
from pipeline.ingest import isolated, reading
from pipeline.ingest.landing import discover
from pipeline.ingest.object_store import is_uri, parse_uri
from pipeline.ingest.results import FileResult, IngestResult, landed_at
from pipeline.ingest.rule_results import DAY_ARCHIVED, DAY_ARCHIVED_EXPECTATION, STAGE, Validation, ValidatorError
from pipeline.warehouse import db, handle, sqlfiles
from pipeline.warehouse.handle import Warehouse
from pipeline.warehouse.schema import Schema, load_schema

Progress = Callable[[int, int, Path], None]


@dataclass
class _StoreJob:
    """What storing one file writes: a manifest row, and for a loaded file its staged rows."""

    index: int
    result: FileResult
    size: int
    sha: str
    first: int = 0  # the file's rows are stage.validated _id first..first+rows_read-1
    validation: Validation | None = None


@dataclass
class _Batch:
    """A batch of files, its rows staged and validated, waiting to be stored."""

    jobs: list[_StoreJob]  # loaded and rejected files: a manifest row each
    decided: list[tuple[int, FileResult]]  # files skipped or rejected before: no manifest row
    failures: pa.Table | None = None  # (_id, rule, rule_pos) of the staged rows; None: no rows staged
    collided_in_run: pa.Table | None = None  # event_ids with another valid copy in this run (collisions_in_run.sql)


# Rows of whole files staged and validated together. Great Expectations has a fixed cost per run
# (a few dozen SQL queries), so bigger batches are faster; peak memory grows with the batch
# (docs/ingestion.md). A file larger than this is one batch of its own.
DEFAULT_BATCH_ROWS = 1_000_000
# Files per batch at most: what a batch holds per file (its validation, DuckDB's reader state) stays
# bounded, so a backlog of many small files needs no more memory than a few thousand of them.
BATCH_FILES = 2_000
# The first batches are smaller (1/8, then 1/2 of the batch): nothing is stored until the first is
# staged and validated, so storing, the critical path, starts seconds sooner; each later batch is
# staged while the one before it is stored.
RAMP_SHARES = (8, 2)
# The ingest's DuckDB memory: two staged batches (one being validated, one being stored) and the
# warehouse's working memory. Past it, staged rows spill to <db>.tmp.
DUCKDB_MEMORY_LIMIT = "800MB"
# DuckDB errors that say nothing about the file being staged: never a reason to reject it
_NOT_THE_FILE = (duckdb.OutOfMemoryException, duckdb.InterruptException, duckdb.FatalException,
                 duckdb.TransactionException)
# DuckDB's worker threads, shared by the storing and the staging thread, which each run their own queries
# too: one worker fewer than the cores keeps the two from taking turns on the same core. On 2 cores (none
# but the callers) the 5M-row benchmark stores 20 % faster than with DuckDB's default of one per core.
DUCKDB_THREADS = max(1, isolated.CORES - 1)
_validators: dict[Schema, Any] = {}


_gx_loader: threading.Thread | None = None


def _import_quietly(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception:  # the staging thread's own import raises it again, with the boundary's message
        pass


def _start_loading_gx() -> None:
    """Import Great Expectations (seconds) in a thread while the first files are read and hashed."""
    global _gx_loader
    if _gx_loader is None and "pipeline.ingest.validate" not in sys.modules:
        _gx_loader = threading.Thread(target=_import_quietly, args=("pipeline.ingest.validate",), daemon=True)
        _gx_loader.start()


def validator_for(schema: Schema) -> Any:
    """One Validator per schema for the life of this process (a scheduler pays for GX once)."""
    if schema not in _validators:
        from pipeline.ingest.validate import Validator

        _validators[schema] = Validator(schema)
    return _validators[schema]


_DONE = object()


class _Background:
    """Items made by a daemon thread, up to `ahead` of them in advance; iterating yields them, and
    raises the thread's exception. Setting `stop` ends the thread at its next item."""

    def __init__(self, items: Callable[[], Iterable[Any]], ahead: int, stop: threading.Event):
        self._items, self._stop = items, stop
        self._out: queue.Queue[Any] = queue.Queue(maxsize=ahead)
        self._thread = threading.Thread(target=self._produce, daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._items():
                if not self._put(item):
                    return
            self._put(_DONE)
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put(exc)

    def __iter__(self) -> Iterator[Any]:
        while True:
            try:
                item = self._out.get(timeout=0.1)
            except queue.Empty:
                stopping.check()  # a stop request is noticed while waiting, too
                if self._stop.is_set():  # the run ended: so does a thread waiting here
                    raise stopping.Interrupted("the ingest run ended") from None
                continue
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def finished(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the thread to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


def decided_file(path: Path | str, entry: tuple) -> FileResult:
    """A file whose sha256 the manifest already holds (`entry`: status, where, when, reason, rows): skipped, or
    rejected again with the first verdict, without a new manifest row (the Spark ingest says the same)."""
    status, where, when, reason, rows = entry
    at = f"{when:%Y-%m-%d %H:%M} UTC" if isinstance(when, datetime) else str(when)
    if status == "rejected":  # the same bytes: the same verdict, without a new manifest row
        return FileResult(str(path), "rejected", rows_read=rows,
                          reason=f"{reason} (already rejected as {where} at {at})")
    return FileResult(str(path), "skipped", reason=f"already ingested as {where} at {at}")


def demote(by_file_id: dict[int, FileResult], demoted: Iterable[tuple[int, int]]) -> None:
    """(file_id, rows): rows of a file stored earlier in this run that a later copy replaced count as its
    duplicates from now on (files of earlier runs keep their stored counts, which the SQL updated)."""
    for file_id, n in demoted:
        if file_id in by_file_id:
            by_file_id[file_id].accepted -= n
            by_file_id[file_id].duplicates += n


def _reject(batch: _Batch, index: int, checked: reading.Checked, reason: str, known: dict[str, tuple],
            name: str) -> None:
    """A file of this run (`name`: as the manifest names it) rejected whole: its manifest row to store, and its
    sha256 remembered with the verdict, so a copy later in the run is rejected again with it."""
    reason = reason.replace(str(checked.path), name)  # a message naming a fetched object's local copy
    known[checked.sha] = ("rejected", name, "this run", reason, checked.rows)
    result = FileResult(name, "rejected", rows_read=checked.rows, reason=reason)
    batch.jobs.append(_StoreJob(index, result, checked.size, checked.sha))


class Ingestor:
    """One ingest run.

    The staging thread reads batches of whole files of up to `batch_rows` rows into an in-memory
    DuckDB database (`stage`), where Great Expectations validates them through its SQL data source.
    The caller's thread attaches the warehouse to the same DuckDB instance for each batch, stores
    the batch's files from the staged rows (_store_batch), and detaches it, so readers get the file
    between batches. At most two batches are staged at a time: `stage.batch`, being validated, and
    `stage.validated`, being stored.
    """

    def __init__(self, warehouse: Warehouse, now: datetime | None = None, batch_rows: int = DEFAULT_BATCH_ROWS,
                 schema: Schema | None = None, reader: isolated.ReaderLimits | None = None):
        self.warehouse = warehouse
        self.reader = reader or isolated.ReaderLimits()
        self.now = clock.now(now)
        self.schema = schema or load_schema()
        self.batch_rows = batch_rows
        self._results: dict[int, FileResult] = {}
        self._by_file_id: dict[int, FileResult] = {}
        self._stored_before = 0  # the last file_id of the warehouse when the run began
        self._archived_days: pa.Table | None = None  # (release, day)s moved to the archive when the run began
        self._stop = threading.Event()
        self._stored = threading.Semaphore(1)  # stage.validated may be replaced: its batch is stored
        self._names: dict[Path, str] = {}

    def _name(self, path: Path) -> str:
        return self._names.get(path, str(path))

    def run(self, files: list[Path], progress: Progress | None = None,
            names: dict[Path, str] | None = None) -> list[FileResult]:
        """`names`: what the manifest and the results call a file instead of its path (a fetched object's URI)."""
        self._names = names or {}
        with self.warehouse.writing() as con:
            known = {row[0]: row[1:] for row in sqlfiles.run(con, "ingest/loaded_files").fetchall()}
            self._stored_before = sqlfiles.run(con, "ingest/last_file_id").fetchall()[0][0]
            self._archived_days = sqlfiles.arrow(con, "archive/archived_event_days")
        con = duckdb.connect(config={"threads": DUCKDB_THREADS, "memory_limit": DUCKDB_MEMORY_LIMIT,
                                     "temp_directory": f"{self.warehouse.path}.tmp"})
        staging = con.cursor()
        con.execute(f"ATTACH ':memory:' AS {STAGE}")
        con.execute(f"CREATE TABLE {STAGE}.run_keys (key UBIGINT)")
        sqlfiles.run(con, "ingest/cast_macros")
        pool = isolated.ReaderPool(self.schema, frozenset(known), self.reader)
        batches = _Background(lambda: self._batches(staging, pool.checked(files), known), 1, self._stop)
        try:
            for batch in batches:
                for index, result in batch.decided:
                    self._results[index] = result
                self._store_batch(con, batch, progress, len(files))
                self._stored.release()
        finally:
            self._stop.set()
            self._stored.release()  # a staging thread waiting to hand over its batch sees the stop
            pool.close()  # a staging thread waiting for a file's check sees the stop
            staging.interrupt()
            if batches.finished(timeout=10):  # closing under a running query is not safe
                staging.close()  # the staged rows go with the in-memory database
                con.close()
        if progress:
            progress(len(files), len(files), Path(""))
        return [self._results[i] for i in sorted(self._results)]

    # --- the staging thread -----------------------------------------------------------------------

    def _batches(self, con: duckdb.DuckDBPyConnection, checks: Iterable[reading.Checked],
                 known: dict[str, tuple]) -> Iterator[_Batch]:
        """The checked files in batches, each staged and validated, and promoted to stage.validated once
        the batch before it is stored."""
        pending: list[tuple[int, reading.Checked]] = []
        pending_rows = 0
        batch = _Batch([], [])
        sizes = iter([max(1, self.batch_rows // share) for share in RAMP_SHARES])
        batch_rows = next(sizes)
        for index, checked in enumerate(checks):
            if checked.sha in known:
                batch.decided.append((index, decided_file(self._name(checked.path), known[checked.sha])))
            elif checked.reason is not None:
                _reject(batch, index, checked, checked.reason, known, self._name(checked.path))
            else:
                _start_loading_gx()
                known[checked.sha] = ("loaded", self._name(checked.path), "this run", None, checked.rows)
                pending.append((index, checked))
                pending_rows += checked.rows
            if pending_rows >= batch_rows or len(batch.jobs) + len(pending) >= BATCH_FILES:
                yield self._staged(con, batch, pending, known)
                pending, pending_rows, batch = [], 0, _Batch([], [])
                batch_rows = next(sizes, self.batch_rows)
        if pending or batch.jobs or batch.decided:
            yield self._staged(con, batch, pending, known)

    def _staged(self, con: duckdb.DuckDBPyConnection, batch: _Batch, pending: list[tuple[int, reading.Checked]],
                known: dict[str, tuple]) -> _Batch:
        staged = self._stage(con, batch, pending, known) if pending else []
        if staged:
            self._validate(con, batch, staged, known)
            con.register("batch_failures", batch.failures)
            sqlfiles.run(con, "ingest/collisions_in_run")
            batch.collided_in_run = con.sql("SELECT event_id FROM batch_collided").to_arrow_table()
            con.unregister("batch_failures")
        self._stored.acquire()  # the batch before this one is stored: its staged rows may go
        if self._stop.is_set():
            raise stopping.Interrupted("stopped by a signal at a safe point")
        if batch.failures is not None:
            sqlfiles.run(con, "ingest/promote_batch")
        return batch

    def _stage(self, con: duckdb.DuckDBPyConnection, batch: _Batch, pending: list[tuple[int, reading.Checked]],
               known: dict[str, tuple]) -> list[tuple[int, reading.Checked, int]]:
        """Read the pending files into stage.batch, cast to the contract; (index, file, first _id) of
        those staged. A file with a value that cannot be cast is rejected, naming the column."""
        con.execute(reading.stage_table_sql(self.schema))
        firsts = list(accumulate((c.rows for _, c in pending), initial=0))[:-1]
        try:  # all files in one statement (DuckDB reads them in parallel); on an error, one by one
            _insert(con, pending, firsts)
            return [(i, c, first) for (i, c), first in zip(pending, firsts, strict=True)]
        except duckdb.Error:
            pass
        staged, first = [], 0
        for index, checked in pending:
            try:
                _insert(con, [(index, checked)], [first])
            except _NOT_THE_FILE:
                raise
            except duckdb.Error as exc:
                _reject(batch, index, checked, reading.staging_error(exc), known, self._name(checked.path))
                continue
            staged.append((index, checked, first))
            first += checked.rows
        return staged

    def _validate(self, con: duckdb.DuckDBPyConnection, batch: _Batch,
                  staged: list[tuple[int, reading.Checked, int]], known: dict[str, tuple]) -> None:
        """Great Expectations' findings on stage.batch, as a store job per file."""
        sizes = [c.rows for _, c, _ in staged]
        validator = validator_for(self.schema)
        validator.bind(con)
        try:
            found: list[Validation | str] = validator.validate("batch", self.now, sum(sizes)).split(sizes)
        except ValidatorError:  # find the file GX cannot evaluate: each on its own
            found = []
            for (_, _, first), size in zip(staged, sizes, strict=True):
                sqlfiles.run(con, "ingest/stage_file", {"first": first, "last": first + size - 1})
                try:
                    found.append(validator.validate("file", self.now, size).shifted(first, size))
                except ValidatorError as exc:
                    found.append(f"validator error: {exc}")
        late = _archived_day_rows(con, self._archived_days)
        for (index, checked, first), v in zip(staged, found, strict=True):
            if isinstance(v, Validation) and late is not None:
                mine = late[(late >= first) & (late < first + checked.rows)] - first
                v = v.plus(DAY_ARCHIVED, DAY_ARCHIVED_EXPECTATION, mine, checked.rows)
            if isinstance(v, str):
                _reject(batch, index, checked, v, known, self._name(checked.path))
                continue
            result = FileResult(self._name(checked.path), "loaded", rows_read=checked.rows, extra_columns=checked.extra,
                                missing_columns=checked.missing, landed_at=landed_at(checked.path))
            batch.jobs.append(_StoreJob(index, result, checked.size, checked.sha, first, v))
        batch.failures = pa.concat_tables(
            [v.failure_pairs(offset=j.first) for j in batch.jobs if (v := j.validation) is not None]
            or [Validation([]).failure_pairs()])

    # --- the caller's thread: storing ---------------------------------------------------------------

    def _store_batch(self, con: duckdb.DuckDBPyConnection, batch: _Batch, progress: Progress | None,
                     total: int) -> None:
        """The batch's files in file order, in one transaction: a file's rows and manifest row go in together,
        so a kill leaves each file wholly in or out. When an event_id of the batch has another valid copy
        (rare), each file is a transaction of its own, since which copy wins depends on the files before it."""
        if not batch.jobs:  # every file was decided before: nothing to write
            return
        jobs = sorted(batch.jobs, key=lambda j: j.index)
        with self.warehouse.attached(con):
            if batch.failures is not None:
                con.register("batch_failures", batch.failures)
                con.register("batch_collided", batch.collided_in_run)
                # once per batch: one scan of the event_ids stored before this run
                sqlfiles.run(con, "ingest/find_collisions", {"stored_before": self._stored_before})
                collisions = con.execute("SELECT count(*) FROM collided").fetchone()[0] > 0
            else:
                collisions = False
            for group in ([[j] for j in jobs] if collisions else [jobs]):
                stopping.check()  # between transactions
                if progress:
                    progress(group[-1].index, total, Path(group[-1].result.path))
                ids, demoted = _store(con, group, collisions, self.now)
                for job, file_id in zip(group, ids, strict=True):
                    self._by_file_id[file_id] = job.result
                demote(self._by_file_id, demoted)
                for job in group:
                    self._results[job.index] = job.result
            if batch.failures is not None:
                con.unregister("batch_failures")
                con.unregister("batch_collided")


def _store(con: Any, group: list[_StoreJob], collisions: bool,
           now: datetime) -> tuple[list[int], list[tuple[int, int]]]:
    """These files in one transaction: their manifest rows, quarantined rows, new rows and GX's results.
    `collisions`: an event_id of the batch has another valid copy (then the group is one file). Returns the files'
    ids and the (file_id, rows) of earlier files whose stored copy lost to one of these."""
    ids = sorted(r[0] for r in sqlfiles.run(con, "ingest/reserve_file_ids", {"n": len(group)}).fetchall())
    for job in group:
        if job.validation is not None:  # every valid row is new, unless collisions say otherwise below
            job.result.quarantined = job.validation.rows_failing()
            job.result.accepted = job.result.rows_read - job.result.quarantined
    con.register("group_files", pa.Table.from_pylist(
        [_manifest_row(file_id, job) for job, file_id in zip(group, ids, strict=True)], schema=_GROUP_FILES))
    con.register("group_validations", _validations(group, ids))
    demoted: list[tuple[int, int]] = []
    with db.transaction(con):  # never a ROLLBACK after a failed COMMIT: it would hide the real cause
        sqlfiles.run(con, "ingest/insert_files", {"ingested_at": now})
        if any(job.validation is not None for job in group):
            sqlfiles.run(con, "ingest/insert_quarantine", {"quarantined_at": now})
            inserted = sqlfiles.run(con, "ingest/insert_events").fetchone()[0]
            sqlfiles.run(con, "ingest/insert_validations")
            expected = sum(job.result.accepted for job in group)
            if collisions:
                demoted = _settle_collisions(con, ids[0], group[0], inserted)
            elif inserted != expected:  # rolls the group back
                raise RuntimeError(f"ingest stored {inserted} rows where its counts say {expected}")
    con.unregister("group_files")
    con.unregister("group_validations")
    return ids, demoted


def _insert(con: duckdb.DuckDBPyConnection, files: list[tuple[int, reading.Checked]], firsts: list[int]) -> None:
    """Stage these (index, file)s, their rows numbered from their `firsts`; files laid out alike are
    read by one read_parquet."""
    with reading.readable_paths([c.path for _, c in files]) as paths:
        groups: dict[str, list[int]] = {}
        for i, (_, checked) in enumerate(files):
            groups.setdefault(checked.layout, []).append(i)
        params: dict[str, Any] = {}
        for n, members in enumerate(groups.values()):
            params |= {f"path_{n}": [paths[i] for i in members], f"first_{n}": [firsts[i] for i in members],
                       f"file_{n}": [files[i][0] for i in members]}
        selects = " UNION ALL ".join(reading.select_sql(files[members[0]][1], n)
                                     for n, members in enumerate(groups.values()))
        con.execute(f"INSERT INTO {STAGE}.batch BY NAME {selects}", params)


def _archived_day_rows(con: duckdb.DuckDBPyConnection, archived_days: pa.Table | None) -> np.ndarray | None:
    """The _ids of stage.batch's rows of a day already moved to the archive; None when none has moved."""
    if archived_days is None or archived_days.num_rows == 0:
        return None
    con.register("archived_event_days", archived_days)
    try:
        ids = sqlfiles.arrow(con, "ingest/archived_day_rows").column("_id").to_numpy()
    finally:
        con.unregister("archived_event_days")
    return ids.astype(np.int64)


def _settle_collisions(con: Any, file_id: int, job: _StoreJob, inserted: int) -> list[tuple[int, int]]:
    """One file whose batch has event_ids with several valid copies, `inserted` of its rows stored as new:
    rank_copies.sql says which copy wins; returns (file_id, rows) of earlier files whose stored copy lost
    to one of this file's."""
    result = job.result
    span = {"first": job.first, "last": job.first + result.rows_read - 1}
    sqlfiles.run(con, "ingest/rank_copies", span)
    sqlfiles.run(con, "ingest/replaced_rows")
    sqlfiles.run(con, "ingest/mark_stale_days")
    demoted = [(int(f), int(n)) for f, n in sqlfiles.run(con, "ingest/replaced_per_file").fetchall()]
    sqlfiles.run(con, "ingest/demote_replaced")
    sqlfiles.run(con, "ingest/delete_replaced")
    result.accepted = inserted + sqlfiles.run(con, "ingest/insert_winners", {"file_id": file_id}).fetchone()[0]
    result.duplicates = result.rows_read - result.quarantined - result.accepted
    sqlfiles.run(con, "ingest/update_file_counts", {
        "file_id": file_id, "accepted": result.accepted, "quarantined": result.quarantined,
        "duplicates": result.duplicates})
    return demoted


_GROUP_FILES = pa.schema([
    ("file_id", pa.int32()), ("staged_file", pa.int32()), ("first", pa.int64()), ("path", pa.string()),
    ("size_bytes", pa.int64()), ("sha256", pa.string()), ("rows_read", pa.int64()), ("accepted", pa.int64()),
    ("quarantined", pa.int64()), ("duplicates", pa.int64()), ("status", pa.string()), ("reason", pa.string()),
    ("extra_columns", pa.list_(pa.string())), ("missing_columns", pa.list_(pa.string()))])


def _manifest_row(file_id: int, job: _StoreJob) -> dict[str, Any]:
    r = job.result
    first = job.first if job.validation is not None else None
    return {"file_id": file_id, "staged_file": job.index, "first": first, "path": r.path, "size_bytes": job.size,
            "sha256": job.sha, "rows_read": r.rows_read, "accepted": r.accepted, "quarantined": r.quarantined,
            "duplicates": r.duplicates, "status": r.status, "reason": r.reason, "extra_columns": r.extra_columns,
            "missing_columns": r.missing_columns}


_VALIDATIONS = pa.schema([("file_id", pa.int32()), ("rule", pa.string()), ("expectation", pa.string()),
                          ("success", pa.bool_()), ("element_count", pa.int64()), ("unexpected_count", pa.int64())])


def _validations(group: list[_StoreJob], ids: list[int]) -> pa.Table:
    """GX's per-rule results of the group's loaded files, one row per file and rule."""
    rows = [(file_id, r) for job, file_id in zip(group, ids, strict=True) if job.validation is not None
            for r in job.validation.results]
    return pa.table([pa.array([f for f, _ in rows], pa.int32()), pa.array([r.rule for _, r in rows]),
                     pa.array([r.expectation for _, r in rows]), pa.array([r.success for _, r in rows]),
                     pa.array([r.element_count for _, r in rows], pa.int64()),
                     pa.array([r.unexpected_count for _, r in rows], pa.int64())], schema=_VALIDATIONS)


def ingest(warehouse: Warehouse | Path, paths: list[Path | str], now: datetime | None = None,
           progress: Progress | None = None, batch_rows: int = DEFAULT_BATCH_ROWS,
           reader: isolated.ReaderLimits | None = None, landing: LandingSettings | None = None,
           relist: bool = False) -> IngestResult:
    """Local files and folders, and s3:// landings (`landing`: where their store is; `relist`: list each whole)."""
    now = clock.now(now)  # one moment for every chunk of the run
    uris = [parse_uri(p) for p in paths if is_uri(p)]  # a bad URI fails before any work
    landed = discover([Path(p) for p in paths if not is_uri(p)])  # links out of a folder are refused, never opened
    refused = [FileResult(r.path, "refused", reason=r.reason) for r in landed.refused]
    with handle.of(warehouse, "ingest") as wh:
        def read(files: list[Path], names: dict[Path, str] | None = None) -> list[FileResult]:
            return Ingestor(wh, now, batch_rows, reader=reader).run(files, progress, names)

        result = IngestResult(read(landed.files) if landed.files or not uris else [])
        if uris:
            from pipeline.ingest.from_bucket import ingest_bucket  # boto3 only when a bucket is named

            for uri in uris:
                files, listing = ingest_bucket(wh, uri, read, BATCH_FILES, landing or LandingSettings(), now, relist)
                result.files += files
                result.sources.append(listing)
        result.files += refused
        return result
