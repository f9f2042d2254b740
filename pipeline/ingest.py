"""`pipeline ingest`: landed Parquet -> validated, deduplicated rows in DuckDB.

Per file, in order:
1. content hash: a file whose sha256 is already loaded (any name) is skipped;
2. read the whole file (a readable footer proves nothing) and cast each contract
   column; a missing required column or an uncastable one rejects the file;
3. Great Expectations checks every row rule (validate.py);
4. one transaction: manifest row, quarantined rows with the rules they broke,
   new valid rows, GX's per-rule results. A kill leaves the file wholly in or out.

A row that breaks a rule is quarantined even when its event_id is already
stored: validity is decided first, then only valid rows are deduplicated, so
the outcome does not depend on the order files arrive in.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import clock, db, sqlfiles, stopping
from pipeline.landing import discover, shown
from pipeline.output_schema import SCHEMA_VERSION
from pipeline.rule_results import Validation, ValidatorError
from pipeline.schema import Column, Schema, load_schema

Progress = Callable[[int, int, Path], None]


class FileRejected(Exception):
    """The whole file is unusable; the message is the one-line reason."""


@dataclass
class FileResult:
    path: str
    status: str  # loaded | rejected | skipped | refused (outside the landing folder: never opened)
    rows_read: int = 0
    accepted: int = 0
    quarantined: int = 0
    duplicates: int = 0
    reason: str | None = None
    extra_columns: list[str] = field(default_factory=list)
    missing_columns: list[str] = field(default_factory=list)


@dataclass
class IngestResult:
    files: list[FileResult] = field(default_factory=list)

    def _sum(self, key: str) -> int:
        return sum(getattr(f, key) for f in self.files)

    @property
    def accepted(self) -> int:
        return self._sum("accepted")

    def to_dict(self) -> dict[str, Any]:
        def listed(status: str) -> list[dict[str, str | None]]:
            return [{"path": f.path, "reason": f.reason} for f in self.files if f.status == status]

        return {
            "schema_version": SCHEMA_VERSION,
            "files": len(self.files),
            "loaded_files": sum(f.status == "loaded" for f in self.files),
            "rows_read": self._sum("rows_read"),
            "accepted": self.accepted,
            "quarantined": self._sum("quarantined"),
            "duplicates": self._sum("duplicates"),
            "rejected_files": listed("rejected"),
            "skipped_files": listed("skipped"),
            "refused_files": listed("refused"),
            "per_file": [asdict(f) for f in self.files],
        }

    def __str__(self) -> str:
        d = self.to_dict()
        refused = f", {len(d['refused_files'])} refused" if d["refused_files"] else ""
        lines = [
            f"{d['files']} files: {d['loaded_files']} loaded, {len(d['rejected_files'])} rejected, "
            f"{len(d['skipped_files'])} already ingested{refused}",
            f"{d['rows_read']} rows read: {d['accepted']} accepted, {d['quarantined']} quarantined, "
            f"{d['duplicates']} duplicates",
        ]
        for f in self.files:
            name = shown(f.path)  # a newline in a file name must not split its line
            if f.status in ("rejected", "refused"):
                lines.append(f"  {f.status:<8} {name}: {shown(f.reason or '')}")
            elif f.status == "skipped":
                lines.append(f"  skipped  {name}: {shown(f.reason or '')}")
            if f.extra_columns:
                lines.append(f"  note     {name}: ignored columns not in the contract: {', '.join(f.extra_columns)}")
            if f.missing_columns:
                lines.append(f"  note     {name}: optional columns absent, loaded as NULL: "
                             f"{', '.join(f.missing_columns)}")
        return "\n".join(lines)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cast_column(arr: pa.ChunkedArray, col: Column) -> pa.ChunkedArray:
    src = arr.type
    if col.type == "string":
        if pa.types.is_dictionary(src):
            arr, src = arr.cast(src.value_type), src.value_type
        if not (pa.types.is_string(src) or pa.types.is_large_string(src) or pa.types.is_string_view(src)):
            raise TypeError(f"is {src}, expected string")
        return arr.cast(pa.string())
    if col.type == "timestamp":
        if not pa.types.is_timestamp(src):
            raise TypeError(f"is {src}, expected a timestamp")
        if src.tz is not None:  # Arrow keeps instants in UTC; dropping the zone keeps the UTC wall time
            arr = arr.cast(pa.timestamp(src.unit))
        # sub-microsecond digits are below telemetry's precision: ns is truncated to µs
        return arr.cast(pa.timestamp("us"), safe=src.unit != "ns")
    if col.type == "bool" and not pa.types.is_boolean(src):
        raise TypeError(f"is {src}, expected bool")
    if col.type in ("int32", "float64") and not (pa.types.is_integer(src) or pa.types.is_floating(src)):
        raise TypeError(f"is {src}, expected {col.type}")
    out = arr.cast(col.arrow_type)  # safe: overflow or fractional ints raise
    if col.type == "float64":  # NaN is not a measurement: it counts as missing
        out = pc.if_else(pc.is_nan(out), pa.scalar(None, pa.float64()), out)
    return out


def _not_parquet(path: Path) -> str | None:
    """For a file that is not Parquet at all (a CSV, say): the reason, with how to convert it."""
    from pipeline.data_quality import convert_hint

    with path.open("rb") as fh:
        if path.suffix == ".parquet" or fh.read(4) == b"PAR1":
            return None  # Parquet, but damaged: pyarrow's message says how
    return f"not a Parquet file (no Parquet header); convert it first, e.g. {convert_hint(path)}"


def read_contract_table(path: Path, schema: Schema) -> tuple[pa.Table, list[str], list[str]]:
    """The file as a table of exactly the contract's columns and types, plus the
    extra columns ignored and the optional columns absent. Raises FileRejected."""
    try:
        raw = pq.read_table(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError and friends
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FileRejected(_not_parquet(path) or f"not a readable Parquet file: {message}") from None
    present = set(raw.column_names)
    missing_required = [n for n in schema.required if n not in present]
    if missing_required:
        raise FileRejected(f"missing required column {', '.join(repr(n) for n in missing_required)}")
    columns, missing = [], []
    for col in schema.columns:
        if col.name not in present:
            missing.append(col.name)
            columns.append(pa.chunked_array([pa.nulls(raw.num_rows, col.arrow_type)]))
            continue
        try:
            columns.append(_cast_column(raw[col.name], col))
        except (TypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            detail = str(exc).splitlines()[0]
            raise FileRejected(f"column {col.name!r} cannot be cast to {col.type}: {detail}") from None
    extra = [n for n in raw.column_names if n not in schema.names]
    table = pa.Table.from_arrays(columns, schema=schema.arrow_schema())
    return table, extra, missing


@dataclass
class _Pending:
    """A readable file waiting for its batch's validation."""

    index: int
    path: Path
    sha: str
    size: int
    table: pa.Table
    extra: list[str]
    missing: list[str]


@dataclass
class _StoreJob:
    """What one transaction writes: a manifest row, and for a loaded file its rows."""

    index: int
    result: FileResult
    size: int
    sha: str
    batch: pa.Table | None = None
    validation: Any = None


DEFAULT_BATCH_ROWS = 500_000  # rows of whole files per Great Expectations run
_worker_validator: Any = None
_pool: ProcessPoolExecutor | None = None


def _exit_with_parent(parent: int) -> None:
    """A worker whose ingest process was killed (kill -9) would wait forever: leave with it."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _worker_start() -> None:
    global _worker_validator
    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C and systemd signal the whole group: the main
        signal.signal(signum, signal.SIG_IGN)  # process decides when to stop (stopping.py); this one leaves with it
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    from pipeline.validate import Validator  # only the worker process pays for Great Expectations

    _worker_validator = Validator(load_schema())


def _worker_validate(table: pa.Table, now: datetime) -> Validation | str:
    """GX's findings for `table`, or the reason it could not evaluate a rule."""
    try:
        return _worker_validator.validate(table, now)
    except ValidatorError as exc:
        return f"validator error: {exc}"


def validation_pool() -> ProcessPoolExecutor:
    """The GX worker, started on first use and kept for the life of this process,
    so a scheduler or a test run pays for loading GX once. spawn, not fork: this
    process has DuckDB threads."""
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_worker_start)
        _pool.submit(int)  # start it now: loading GX takes seconds
    return _pool


def shutdown_validation_pool() -> None:
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)
        _pool = None


class Ingestor:
    """One ingest run.

    Great Expectations runs in a worker process, on batches of whole files (up to
    `batch_rows` rows): a GX run has a fixed cost of about half a second, so one
    run per small file would dominate, and GX holds the GIL, so only another
    process overlaps it with DuckDB's storing of the previous batch. Each file is
    stored in its own transaction, by this process alone.
    """

    def __init__(self, db_path: Path, now: datetime | None = None, batch_rows: int = DEFAULT_BATCH_ROWS):
        self.db_path = db_path
        self.now = clock.now(now)
        self.schema = load_schema()
        self.batch_rows = batch_rows
        self._results: dict[int, FileResult] = {}

    def run(self, files: list[Path], progress: Progress | None = None) -> list[FileResult]:
        with db.writing(self.db_path) as con:
            known = {sha: (path, at) for sha, path, at in sqlfiles.run(con, "ingest/loaded_files").fetchall()}
        previous: tuple[Future | None, list[_Pending], list[_StoreJob]] | None = None
        for pending, rejected in self._batches(files, known, progress):
            table = pa.concat_tables([p.table for p in pending]) if pending else None
            current = (self._submit(table) if table else None, pending, rejected)
            if previous:
                self._store_all(self._jobs(*previous))  # while GX validates `current`
            previous = current
        if previous:
            self._store_all(self._jobs(*previous))
        if progress:
            progress(len(files), len(files), Path(""))
        return [self._results[i] for i in sorted(self._results)]

    def _batches(self, files: list[Path], known: dict[str, tuple],
                 progress: Progress | None) -> Iterator[tuple[list[_Pending], list[_StoreJob]]]:
        pending: list[_Pending] = []
        rejected: list[_StoreJob] = []
        for i, path in enumerate(files):
            stopping.check()
            if progress:
                progress(i, len(files), path)
            outcome = self._prepare(i, path, known)
            if isinstance(outcome, _StoreJob):
                rejected.append(outcome)
            elif isinstance(outcome, FileResult):
                self._results[i] = outcome
            else:
                pending.append(outcome)
            if sum(p.table.num_rows for p in pending) >= self.batch_rows:
                yield pending, rejected
                pending, rejected = [], []
        if pending or rejected:
            yield pending, rejected

    def _prepare(self, index: int, path: Path, known: dict[str, tuple]) -> FileResult | _StoreJob | _Pending:
        sha = sha256_of(path)
        size = path.stat().st_size
        if sha in known:
            where, when = known[sha]
            shown = f"{when:%Y-%m-%d %H:%M} UTC" if isinstance(when, datetime) else str(when)
            return FileResult(str(path), "skipped", reason=f"already ingested as {where} at {shown}")
        validation_pool()  # GX loads in the worker while this process reads files
        try:
            table, extra, missing = read_contract_table(path, self.schema)
        except FileRejected as exc:
            return _StoreJob(index, FileResult(str(path), "rejected", reason=str(exc)), size, sha)
        known[sha] = (str(path), "this run")
        return _Pending(index, path, sha, size, table, extra, missing)

    def _submit(self, table: pa.Table) -> Future:
        return validation_pool().submit(_worker_validate, table, self.now)

    def _jobs(self, future: Future | None, pending: list[_Pending], rejected: list[_StoreJob]) -> list[_StoreJob]:
        jobs = list(rejected)
        if future is None:
            return jobs
        found = future.result()
        if isinstance(found, str):
            if len(pending) == 1:
                p = pending[0]
                return jobs + [_StoreJob(p.index, FileResult(str(p.path), "rejected", reason=found), p.size, p.sha)]
            for p in pending:  # find the file GX cannot evaluate: each on its own
                jobs += self._jobs(self._submit(p.table), [p], [])
            return jobs
        for p, v in zip(pending, found.split([p.table.num_rows for p in pending]), strict=True):
            result = FileResult(str(p.path), "loaded", rows_read=p.table.num_rows, extra_columns=p.extra,
                                missing_columns=p.missing)
            batch = p.table.append_column("_row", pa.array(np.arange(p.table.num_rows, dtype=np.int64)))
            jobs.append(_StoreJob(p.index, result, p.size, p.sha, batch, v))
        return jobs

    def _store_all(self, jobs: list[_StoreJob]) -> None:
        if not jobs:
            return
        with db.writing(self.db_path) as con:
            for job in sorted(jobs, key=lambda j: j.index):
                stopping.check()  # between files: each one is wholly in or out
                self._store(con, job)
                self._results[job.index] = job.result

    def _store(self, con: Any, job: _StoreJob) -> None:
        """One file: its manifest row and its rows in one transaction."""
        result = job.result
        con.begin()
        try:
            file_id = sqlfiles.run(con, "ingest/insert_file", {
                "path": result.path, "size_bytes": job.size, "sha256": job.sha, "rows_read": result.rows_read,
                "accepted": 0, "quarantined": 0, "duplicates": 0, "status": result.status,
                "reason": result.reason, "extra_columns": result.extra_columns,
                "missing_columns": result.missing_columns, "ingested_at": self.now,
            }).fetchone()[0]
            if job.batch is not None:
                self._load_rows(con, file_id, result, job.batch, job.validation)
            con.commit()
        except BaseException:
            con.rollback()
            raise

    def _load_rows(self, con: Any, file_id: int, result: FileResult, batch: pa.Table, validation: Any) -> None:
        con.register("batch", batch)
        con.register("batch_failures", validation.failure_pairs())
        con.register("batch_validations", pa.Table.from_pylist([asdict(r) for r in validation.results]))
        result.quarantined = sqlfiles.run(con, "ingest/insert_quarantine", {
            "file_id": file_id, "source_file": result.path, "quarantined_at": self.now}).fetchone()[0]
        result.accepted = sqlfiles.run(con, "ingest/insert_events", {"file_id": file_id}).fetchone()[0]
        result.duplicates = result.rows_read - result.quarantined - result.accepted
        sqlfiles.run(con, "ingest/update_file_counts", {
            "file_id": file_id, "accepted": result.accepted, "quarantined": result.quarantined,
            "duplicates": result.duplicates})
        sqlfiles.run(con, "ingest/insert_validations", {"file_id": file_id})
        for name in ("batch", "batch_failures", "batch_validations"):
            con.unregister(name)



def ingest(db_path: Path, paths: list[Path], now: datetime | None = None,
           progress: Progress | None = None, batch_rows: int = DEFAULT_BATCH_ROWS) -> IngestResult:
    landed = discover(paths)  # links out of a landing folder are refused here, never opened
    refused = [FileResult(r.path, "refused", reason=r.reason) for r in landed.refused]
    with db.writer_lock(db_path, "ingest"):
        return IngestResult(Ingestor(db_path, now, batch_rows).run(landed.files, progress) + refused)
