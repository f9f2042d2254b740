"""`pipeline ingest`: landed Parquet -> validated, deduplicated rows in DuckDB.

Per file, in order:
1. content hash: a file whose sha256 is already loaded (any name) is skipped;
2. read the whole file (a readable footer proves nothing) and cast each contract
   column; a missing required column or an uncastable one rejects the file;
3. Great Expectations checks every row rule (validate.py), on the rows staged in
   DuckDB;
4. one transaction: manifest row, quarantined rows with the rules they broke,
   new valid rows, GX's per-rule results. A kill leaves the file wholly in or out.

A file rejected for its bytes is remembered by its sha256 too: a rerun lists it
again without reading it or adding a manifest row.

A row that breaks a rule is quarantined even when its event_id is already
stored: validity is decided first, then only valid rows are deduplicated. Of
the valid copies of an event_id the one with the earliest event_time wins, then
the smallest content hash (sql/ingest/rank_copies.sql), so the stored rows do
not depend on the order files arrive in. A later copy that wins replaces the
stored one; the file that held it counts that row as a duplicate from then on.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import clock, db, sqlfiles, stopping
from pipeline.landing import discover, shown
from pipeline.output_schema import SCHEMA_VERSION
from pipeline.rule_results import INDEX, STAGE, Validation, ValidatorError
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
            # a rejected file's rows_read is what its footer claims; none of its rows is stored
            "rows_read": sum(f.rows_read for f in self.files if f.status == "loaded"),
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


def known_file(path: Path, entry: tuple) -> FileResult:
    """A file whose bytes are in the manifest (`known`: sha256 -> status, where, when, reason, rows): skipped,
    or rejected again with the first verdict, without a new manifest row."""
    status, where, when, reason, rows = entry
    shown = f"{when:%Y-%m-%d %H:%M} UTC" if isinstance(when, datetime) else str(when)
    if status == "rejected":  # the same bytes: the same verdict
        return FileResult(str(path), "rejected", rows_read=rows,
                          reason=f"{reason} (already rejected as {where} at {shown})")
    return FileResult(str(path), "skipped", reason=f"already ingested as {where} at {shown}")


def footer_rows(path: Path) -> int:
    """The row count the footer claims (0 when it is unreadable): the manifest's rows_read of a rejected file."""
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception:  # pyarrow raises ArrowInvalid, OSError and friends
        return 0


def read_contract_table(path: Path, schema: Schema) -> tuple[pa.Table, list[str], list[str]]:
    """The file as a table of exactly the contract's columns and types, plus the
    extra columns ignored and the optional columns absent. Raises FileRejected."""
    try:  # a page written with a CRC is checked against it: a flipped bit must not load a wrong value
        raw = pq.read_table(path, page_checksum_verification=True)
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
    """What one transaction writes: a manifest row, and for a loaded file its staged rows."""

    index: int
    result: FileResult
    size: int
    sha: str
    first: int = 0  # the file's rows are stage.batch _id first..first+rows_read-1
    validation: Validation | None = None


# Rows of whole files staged and validated together. Great Expectations has a fixed cost per run
# (a few dozen SQL queries), so bigger batches are faster; peak memory grows with the batch
# (README, Ingestion). A file larger than this is one batch of its own.
DEFAULT_BATCH_ROWS = 1_000_000
DUCKDB_MEMORY_LIMIT = "700MB"  # the ingest connection's working memory (staging, storing, cache)
_validators: dict[Schema, Any] = {}


_gx_loader: threading.Thread | None = None


def _import_quietly(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception:  # the main thread's own import raises it again, with the boundary's message
        pass


def _start_loading_gx() -> None:
    """Import Great Expectations (seconds) in a thread while the first files are read and hashed."""
    global _gx_loader
    if _gx_loader is None and "pipeline.validate" not in sys.modules:
        _gx_loader = threading.Thread(target=_import_quietly, args=("pipeline.validate",), daemon=True)
        _gx_loader.start()


def validator_for(schema: Schema) -> Any:
    """One Validator per schema for the life of this process (a scheduler pays for GX once)."""
    if schema not in _validators:
        from pipeline.validate import Validator

        _validators[schema] = Validator(schema)
    return _validators[schema]


class Ingestor:
    """One ingest run.

    Files are read and cast with Arrow (page checksums verified) in batches of whole
    files of up to `batch_rows` rows. Per batch the warehouse is opened, the batch is
    staged in an in-memory database attached to it (`stage.batch`), Great Expectations
    validates the staged rows through its SQL data source on that same connection, and
    each file is stored from the staging table in its own transaction.
    """

    def __init__(self, db_path: Path, now: datetime | None = None, batch_rows: int = DEFAULT_BATCH_ROWS,
                 schema: Schema | None = None):
        self.db_path = db_path
        self.now = clock.now(now)
        self.schema = schema or load_schema()
        self.batch_rows = batch_rows
        self._results: dict[int, FileResult] = {}
        self._by_file_id: dict[int, FileResult] = {}
        self._collisions = False

    def run(self, files: list[Path], progress: Progress | None = None) -> list[FileResult]:
        with db.writing(self.db_path) as con:
            known = {row[0]: row[1:] for row in sqlfiles.run(con, "ingest/loaded_files").fetchall()}
        for pending, rejected in self._batches(files, known, progress):
            self._process(pending, rejected)
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
            return known_file(path, known[sha])
        _start_loading_gx()
        try:
            table, extra, missing = read_contract_table(path, self.schema)
        except FileRejected as exc:
            result = FileResult(str(path), "rejected", rows_read=footer_rows(path), reason=str(exc))
            known[sha] = ("rejected", str(path), "this run", str(exc), result.rows_read)
            return _StoreJob(index, result, size, sha)
        known[sha] = ("loaded", str(path), "this run", None, table.num_rows)
        return _Pending(index, path, sha, size, table, extra, missing)

    def _process(self, pending: list[_Pending], rejected: list[_StoreJob]) -> None:
        """One batch: stage, validate, then store each file in its own transaction."""
        with db.writing(self.db_path) as con:
            # DuckDB would otherwise keep up to 80 % of RAM of stored blocks cached: bound it, so the
            # run's peak memory follows the batch, not the warehouse (staged rows spill to <db>.tmp)
            con.execute(f"SET memory_limit = '{DUCKDB_MEMORY_LIMIT}'")
            jobs = list(rejected)
            if pending:
                con.execute(f"ATTACH ':memory:' AS {STAGE}")
                jobs += self._stage_and_validate(con, pending)
            for job in sorted(jobs, key=lambda j: j.index):
                stopping.check()  # between files: each one is wholly in or out
                self._store(con, job)
                self._results[job.index] = job.result

    def _stage_and_validate(self, con: Any, pending: list[_Pending]) -> list[_StoreJob]:
        sizes = [p.table.num_rows for p in pending]
        firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64).tolist()
        incoming = pa.concat_tables([p.table for p in pending])
        con.register("incoming", incoming.append_column(INDEX, pa.array(np.arange(sum(sizes), dtype=np.int64))))
        sqlfiles.run(con, "ingest/stage_batch")
        con.unregister("incoming")
        del incoming
        for p in pending:
            p.table = p.table.slice(0, 0)  # the staged copy is the one used from here on: free the Arrow one
        pa.default_memory_pool().release_unused()  # hand the batch's Arrow memory back to the system
        validator = validator_for(self.schema)
        validator.bind(con)
        try:
            found: list[Validation | str] = validator.validate("batch", self.now, sum(sizes)).split(sizes)
        except ValidatorError:  # find the file GX cannot evaluate: each on its own
            found = []
            for first, size in zip(firsts, sizes, strict=True):
                sqlfiles.run(con, "ingest/stage_file", {"first": first, "last": first + size - 1})
                try:
                    found.append(validator.validate("file", self.now, size).shifted(first, size))
                except ValidatorError as exc:
                    found.append(f"validator error: {exc}")
        jobs = []
        for p, first, size, v in zip(pending, firsts, sizes, found, strict=True):
            if isinstance(v, str):
                jobs.append(_StoreJob(p.index, FileResult(str(p.path), "rejected", rows_read=size, reason=v),
                                      p.size, p.sha))
                continue
            result = FileResult(str(p.path), "loaded", rows_read=size, extra_columns=p.extra,
                                missing_columns=p.missing)
            jobs.append(_StoreJob(p.index, result, p.size, p.sha, first, v))
        con.register("batch_failures", pa.concat_tables(
            [v.failure_pairs(offset=j.first) for j in jobs if (v := j.validation) is not None]
            or [Validation([]).failure_pairs()]))
        sqlfiles.run(con, "ingest/find_collisions")  # once per batch: one scan of the stored event_ids
        self._collisions = con.execute("SELECT count(*) FROM collided").fetchone()[0] > 0
        return jobs

    def _store(self, con: Any, job: _StoreJob) -> None:
        """One file: its manifest row and its rows in one transaction."""
        result = job.result
        with db.transaction(con):  # never a ROLLBACK after a failed COMMIT: it would hide the real cause
            file_id = sqlfiles.run(con, "ingest/insert_file", {
                "path": result.path, "size_bytes": job.size, "sha256": job.sha, "rows_read": result.rows_read,
                "accepted": 0, "quarantined": 0, "duplicates": 0, "status": result.status,
                "reason": result.reason, "extra_columns": result.extra_columns,
                "missing_columns": result.missing_columns, "ingested_at": self.now,
            }).fetchone()[0]
            demoted: list[tuple[int, int]] = []
            if job.validation is not None:
                demoted = self._load_rows(con, file_id, result, job)
        self._by_file_id[file_id] = result
        for other, n in demoted:  # a row of a file stored earlier in this run was replaced
            if other in self._by_file_id:
                self._by_file_id[other].accepted -= n
                self._by_file_id[other].duplicates += n

    def _load_rows(self, con: Any, file_id: int, result: FileResult, job: _StoreJob) -> list[tuple[int, int]]:
        """Quarantine, then the valid rows deduplicated (rank_copies.sql says which copy wins);
        returns (file_id, rows) of earlier files whose stored copy lost to one of this file's."""
        assert job.validation is not None
        span = {"first": job.first, "last": job.first + result.rows_read - 1}
        con.register("file_validations", pa.Table.from_pylist([asdict(r) for r in job.validation.results]))
        result.quarantined = sqlfiles.run(con, "ingest/insert_quarantine", {
            **span, "file_id": file_id, "source_file": result.path, "quarantined_at": self.now}).fetchone()[0]
        accepted = sqlfiles.run(con, "ingest/insert_events", {**span, "file_id": file_id}).fetchone()[0]
        demoted: list[tuple[int, int]] = []
        if self._collisions:  # rare: an event_id with several valid copies (find_collisions.sql)
            sqlfiles.run(con, "ingest/rank_copies", span)
            sqlfiles.run(con, "ingest/replaced_rows")
            sqlfiles.run(con, "ingest/mark_stale_days")
            demoted = [(int(f), int(n)) for f, n in sqlfiles.run(con, "ingest/replaced_per_file").fetchall()]
            sqlfiles.run(con, "ingest/demote_replaced")
            sqlfiles.run(con, "ingest/delete_replaced")
            accepted += sqlfiles.run(con, "ingest/insert_winners", {"file_id": file_id}).fetchone()[0]
        result.accepted = accepted
        result.duplicates = result.rows_read - result.quarantined - result.accepted
        sqlfiles.run(con, "ingest/update_file_counts", {
            "file_id": file_id, "accepted": result.accepted, "quarantined": result.quarantined,
            "duplicates": result.duplicates})
        sqlfiles.run(con, "ingest/insert_validations", {"file_id": file_id})
        con.unregister("file_validations")
        return demoted


def ingest(db_path: Path, paths: list[Path], now: datetime | None = None,
           progress: Progress | None = None, batch_rows: int = DEFAULT_BATCH_ROWS) -> IngestResult:
    landed = discover(paths)  # links out of a landing folder are refused here, never opened
    refused = [FileResult(r.path, "refused", reason=r.reason) for r in landed.refused]
    with db.writer_lock(db_path, "ingest"):
        return IngestResult(Ingestor(db_path, now, batch_rows).run(landed.files, progress) + refused)
