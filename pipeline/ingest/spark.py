"""`pipeline ingest --engine spark`: landed Parquet -> validated, deduplicated rows in the Spark warehouse, with
the per-file semantics of pipeline/ingest/run.py (docs/ingestion.md; the same counts on the same files):

1. read (Spark tasks, one per file, `mapInArrow`): the DuckDB ingest's own reading (`pipeline/ingest/reading.py`:
   sha256, every page's checksum, casts planned from the footer, then the file cast through the cast macros of
   sql/ingest/cast_macros.sql in the task's own in-memory DuckDB), so the same files are rejected with the same
   reasons. A file already in the manifest is skipped or rejected again without being read. Each task writes
   its cast rows to the batch's staging folder with a row key `_id` = file << 32 | row;
2. Great Expectations validates the batch's rows on Spark (`validate.SparkValidator`, the same suite); when
   it cannot evaluate a rule, each file is validated on its own and only the failing files are rejected;
3. rows that broke rules go to `quarantine` with the names of every rule broken; valid rows are deduplicated
   as on DuckDB: of the valid copies of an event_id (this batch's and the stored one) the earliest event_time
   wins, then the smallest content hash (md5 of the row's JSON), then the stored copy, then the earlier file;
   a stored copy that loses is removed (its partition rewritten) and its file counts it as a duplicate;
4. the manifest rows, GX's per-rule results and the days to roll up again are stored in one DuckDB
   transaction that also commits the staged Parquet, which is then published (pipeline/warehouse/spark/storage.py).

What differs from DuckDB: a batch of files (not each file) is wholly in or wholly out; and the content hash is
Spark's JSON text, not DuckDB's, so when two valid copies share an event_time but differ in content, the two
engines may keep different copies (the counts per file can then differ; the totals do not).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.common import clock, stopping
from pipeline.ingest.landing import discover
from pipeline.ingest.results import FileResult, landed_at
from pipeline.ingest.rule_results import (
    DAY_ARCHIVED,
    DAY_ARCHIVED_EXPECTATION,
    INDEX,
    STAGE,
    STAGED_FILE,
    RuleResult,
    Validation,
    ValidatorError,
)
from pipeline.ingest.run import Progress, decided_file, demote
from pipeline.warehouse import db, handle, sqlfiles
from pipeline.warehouse.schema import Schema, load_schema
from pipeline.warehouse.spark import batches
from pipeline.warehouse.spark.engine import SparkEngine
from pipeline.warehouse.spark.storage import new_batch_id

FILE_BITS = 32  # _id = file index in the batch << 32 | row in the file
DEFAULT_BATCH_FILES = 256  # files read and validated per Spark batch
# one row per file read by a task (`_status`)
_STATUS = pa.schema([("_file", pa.int32()), ("sha", pa.string()), ("size", pa.int64()), ("outcome", pa.string()),
                     ("reason", pa.string()), ("rows", pa.int64()), ("extra", pa.list_(pa.string())),
                     ("missing", pa.list_(pa.string()))])
_validators: dict[Schema, Any] = {}


def _status(i: int, sha: str, size: int, outcome: str, reason: str | None = None, rows: int = 0,
            extra: list[str] | None = None, missing: list[str] | None = None) -> dict[str, Any]:
    return {"_file": i, "sha": sha, "size": size, "outcome": outcome, "reason": reason, "rows": rows,
            "extra": extra or [], "missing": missing or []}


def read_files(batches_in: Iterator[pa.RecordBatch], known: frozenset[str], cast_dir: str,
               schema_path: str) -> Iterator[pa.RecordBatch]:
    """A Spark task (mapInArrow): each file of (_file, path) checked and cast exactly as the DuckDB ingest does
    it (`reading.check`: hash, pages, casts planned from the footer; then the file read into DuckDB through the
    cast macros, in this task's own in-memory DuckDB); the cast rows written to `cast_dir`, one status row per
    file yielded."""
    import duckdb
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from pipeline.ingest import reading

    schema = load_schema(Path(schema_path))
    fs, base = pafs.FileSystem.from_uri(cast_dir)
    con = duckdb.connect()
    con.execute(f"ATTACH ':memory:' AS {STAGE}")
    sqlfiles.run(con, "ingest/cast_macros")
    try:
        for batch in batches_in:
            out = []
            for i, path_text in zip(batch.column("_file").to_pylist(), batch.column("path").to_pylist(), strict=True):
                path = Path(path_text)
                checked = reading.check(path, schema, known)
                if checked.known:
                    out.append(_status(i, checked.sha, checked.size, "known"))
                    continue
                if checked.reason is not None:
                    out.append(_status(i, checked.sha, checked.size, "rejected", checked.reason, checked.rows))
                    continue
                try:
                    with reading.readable_paths([path]) as paths:
                        table = con.sql(reading.select_sql(checked, 0),
                                        params={"path_0": paths, "first_0": [i << FILE_BITS], "file_0": [i]},
                                        ).to_arrow_table().drop_columns([STAGED_FILE])
                except duckdb.Error as exc:  # a value the casts refuse, or damage only a full decode finds
                    out.append(_status(i, checked.sha, checked.size, "rejected", reading.staging_error(exc),
                                       checked.rows))
                    continue
                n = table.num_rows
                table = (table.append_column("_file", pa.array(np.full(n, i, dtype=np.int32)))
                         .append_column("_row", pa.array(np.arange(n, dtype=np.int64))))
                fs.create_dir(base, recursive=True)
                pq.write_table(table, f"{base}/{i:08d}.parquet", filesystem=fs)
                out.append(_status(i, checked.sha, checked.size, "read", rows=checked.rows, extra=checked.extra,
                                   missing=checked.missing))
            yield pa.RecordBatch.from_pylist(out, schema=_STATUS)
    finally:
        con.close()


def validator_for(schema: Schema) -> Any:
    if schema not in _validators:
        from pipeline.ingest.validate import SparkValidator

        _validators[schema] = SparkValidator(schema)
    return _validators[schema]


@dataclass
class _Read:
    """A file of the batch that was read: its manifest facts and its rows (the cast rows are staged)."""

    index: int
    path: Path
    sha: str
    size: int
    rows: int
    extra: list[str]
    missing: list[str]
    file_id: int = 0
    validation: Validation | None = None
    rejected: str | None = None  # validator error

    @property
    def quarantined(self) -> int:
        """Rows that broke at least one rule."""
        v = self.validation
        if v is None or not v.failing_rows:
            return 0
        return len(np.unique(np.concatenate(list(v.failing_rows.values()))))


def _per_file(validation: Validation, reads: dict[int, _Read]) -> dict[int, Validation]:
    """The batch's findings per file (ids file << 32 | row), as Validation.split does for DuckDB's batches."""
    out = {}
    for i, r in reads.items():
        rows = {rule: (idx[(idx >> FILE_BITS) == i] & ((1 << FILE_BITS) - 1)) for rule, idx in
                validation.failing_rows.items()}
        results = [RuleResult(x.rule, x.expectation, len(rows.get(x.rule, ())) == 0, r.rows,
                              len(rows.get(x.rule, ()))) for x in validation.results]
        out[i] = Validation(results, {rule: idx for rule, idx in rows.items() if len(idx)})
    return out


class SparkIngestor:
    def __init__(self, wh: handle.Warehouse, engine: SparkEngine, now: datetime | None = None,
                 batch_files: int = DEFAULT_BATCH_FILES, schema: Schema | None = None):
        self.wh = wh
        self.engine = engine
        self.spark = engine.spark
        self.warehouse = engine.warehouse
        self.now = clock.now(now)
        self.schema = schema or load_schema()
        self.batch_files = batch_files
        self._by_file_id: dict[int, FileResult] = {}

    def run(self, files: list[Path], progress: Progress | None = None) -> list[FileResult]:
        self.warehouse.ensure()
        batches.recover(self.wh, self.warehouse, self.now)
        self.engine.refresh()
        with self.wh.writing() as con:
            known = {row[0]: row[1:] for row in sqlfiles.run(con, "ingest/loaded_files").fetchall()}
        results: list[FileResult] = []
        for start in range(0, len(files), self.batch_files):
            stopping.check()
            if progress:
                progress(start, len(files), files[start])
            results += self._batch(files[start:start + self.batch_files], known)
        if progress:
            progress(len(files), len(files), Path(""))
        return results

    # ---------------------------------------------------------------- one batch

    def _batch(self, files: list[Path], known: dict[str, tuple]) -> list[FileResult]:
        batch = new_batch_id()
        cast_dir = f"{self.warehouse.uri}/_staging/{batch}/cast"
        statuses = self._read(files, known, cast_dir)
        results: dict[int, FileResult] = {}
        reads: dict[int, _Read] = {}
        manifest: list[tuple[int, FileResult, int, str]] = []  # (index, result, size, sha) with a manifest row
        for s in statuses:  # in file order: the first of two identical files in one batch is the one read
            i, path, sha = s["_file"], files[s["_file"]], s["sha"]
            if s["outcome"] == "known" or sha in known:
                results[i] = decided_file(path, known[sha])
            elif s["outcome"] == "rejected":
                results[i] = FileResult(str(path), "rejected", rows_read=s["rows"], reason=s["reason"])
                known[sha] = ("rejected", str(path), "this run", s["reason"], s["rows"])
                manifest.append((i, results[i], s["size"], sha))
            else:
                reads[i] = _Read(i, path, sha, s["size"], s["rows"], list(s["extra"]), list(s["missing"]))
                known[sha] = ("loaded", str(path), "this run", None, s["rows"])
        try:
            if reads:
                self._validate(reads, cast_dir)
            order = sorted([i for i, _, _, _ in manifest] + list(reads))  # file_ids in file order, as on DuckDB
            ids = dict(zip(order, self._reserve(len(order)), strict=True))
            manifest_ids = {i: ids[i] for i, _, _, _ in manifest}
            for r in reads.values():
                r.file_id = ids[r.index]
            stored = self._store(batch, reads, cast_dir) if reads else _Stored()
            for r in reads.values():
                if r.rejected is not None:
                    results[r.index] = FileResult(str(r.path), "rejected", rows_read=r.rows, reason=r.rejected)
                    continue
                accepted = stored.accepted.get(r.index, 0)
                results[r.index] = FileResult(str(r.path), "loaded", rows_read=r.rows, accepted=accepted,
                                              quarantined=r.quarantined,
                                              duplicates=r.rows - r.quarantined - accepted,
                                              extra_columns=r.extra, missing_columns=r.missing,
                                              landed_at=landed_at(r.path))
            self._commit(batch, manifest, manifest_ids, reads, results, stored)
        except BaseException:
            self.warehouse.discard(batch)
            raise
        batches.publish(self.wh, self.warehouse, batch, stored.clear, self.now)
        self.engine.refresh()
        for r in reads.values():
            self._by_file_id[r.file_id] = results[r.index]
        demote(self._by_file_id, stored.demoted.items())
        return [results[i] for i in sorted(results)]

    def _read(self, files: list[Path], known: dict[str, tuple], cast_dir: str) -> list[dict[str, Any]]:
        from pyspark.sql.pandas.types import from_arrow_schema

        from pipeline.warehouse.schema import SCHEMA_PATH

        # absolute: the tasks may run elsewhere (a Spark Connect server, executors) with another working folder
        listing = self.spark.createDataFrame([(i, str(p.absolute())) for i, p in enumerate(files)],
                                             "_file INT, path STRING")
        known_shas = frozenset(known)
        schema_path = str(SCHEMA_PATH)

        def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return read_files(it, known_shas, cast_dir, schema_path)

        rows = listing.repartition(len(files)).mapInArrow(task, from_arrow_schema(_STATUS)).collect()
        return sorted((r.asDict() for r in rows), key=lambda s: s["_file"])

    def _rows(self, cast_dir: str, files: list[int]) -> Any:
        from pyspark.sql import functions as F

        return self.spark.read.parquet(cast_dir).where(F.col("_file").isin(files))

    def _validate(self, reads: dict[int, _Read], cast_dir: str) -> None:
        validator = validator_for(self.schema)
        rows = self._rows(cast_dir, list(reads)).cache()
        try:
            try:
                found = _per_file(validator.validate(rows, self.now, sum(r.rows for r in reads.values())), reads)
            except ValidatorError:  # find the file GX cannot evaluate: each on its own
                from pyspark.sql import functions as F

                found = {}
                for i, r in reads.items():
                    try:
                        one = validator.validate(rows.where(F.col("_file") == i), self.now, r.rows)
                        found[i] = _per_file(one, {i: r})[i]
                    except ValidatorError as exc:
                        r.rejected = f"validator error: {exc}"
            late = self._archived_day_rows(rows)
            for i, v in found.items():
                if late is not None:
                    mine = late[(late >> FILE_BITS) == i] & ((1 << FILE_BITS) - 1)
                    v = v.plus(DAY_ARCHIVED, DAY_ARCHIVED_EXPECTATION, mine, reads[i].rows)
                reads[i].validation = v
        finally:
            rows.unpersist()

    def _archived_day_rows(self, rows: Any) -> np.ndarray | None:
        """The _ids of the batch's rows of a day already moved to the archive (late rows, quarantined with the
        rule day_archived as on DuckDB); None when no day has moved."""
        from pyspark.sql import functions as F

        with self.wh.writing() as con:
            archived = sqlfiles.run(con, "archive/archived_event_days").fetchall()
        if not archived:
            return None
        days = F.broadcast(self.spark.createDataFrame(archived, "release STRING, day DATE"))
        late = rows.join(days, (rows.release == days.release) & (F.to_date(rows.event_time) == days.day), "left_semi")
        return np.array(sorted(r[INDEX] for r in late.select(INDEX).collect()), dtype=np.int64)

    def _reserve(self, n: int) -> list[int]:
        if n == 0:
            return []
        with self.wh.writing() as con:
            return [r[0] for r in sqlfiles.run(con, "ingest/reserve_file_ids", {"n": n}).fetchall()]

    # ---------------------------------------------------------------- quarantine, dedupe, staging

    def _store(self, batch: str, reads: dict[int, _Read], cast_dir: str) -> _Stored:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        loaded = {i: r for i, r in reads.items() if r.rejected is None}
        out = _Stored()
        if not loaded:
            return out
        contract = self.schema.names
        files = self.spark.createDataFrame([(i, r.file_id, str(r.path)) for i, r in loaded.items()],
                                           "_file INT, file_id INT, source_file STRING")
        rows = self._rows(cast_dir, list(loaded)).join(F.broadcast(files), "_file")
        failures = self._failures(loaded)
        day = self.now.strftime("%Y-%m-%d")
        if failures is not None:
            rules = (failures.groupBy(INDEX)
                     .agg(F.sort_array(F.collect_list(F.struct("rule_pos", "rule"))).alias("r"))
                     .select(INDEX, F.col("r.rule").alias("rules")))
            quarantine = (rows.join(rules, INDEX)
                          .select(*contract, "file_id", "source_file", F.col("_row").alias("row_in_file"), "rules",
                                  F.lit(self.now).cast("timestamp_ntz").alias("quarantined_at"),
                                  F.lit(day).alias("date")))
            staged = self.warehouse.staged(batch, "quarantine", "append")
            quarantine.write.partitionBy("date").mode("overwrite").parquet(staged.path)
            valid = rows.join(failures.select(INDEX).distinct(), INDEX, "left_anti")
        else:
            valid = rows
        # dedupe: every valid copy of an event_id, this batch's and the stored one, ranked as DuckDB ranks them
        stored = (self.engine.table("events").join(valid.select("event_id").distinct(), "event_id", "left_semi")
                  .select(*contract, "file_id", "date", F.lit(True).alias("stored"),
                          F.lit(-1).alias("_file"), F.lit(-1).cast("long").alias("_row")))
        mine = valid.select(*contract, "file_id", F.date_format("event_time", "yyyy-MM-dd").alias("date"),
                            F.lit(False).alias("stored"), "_file", "_row")
        cands = mine.unionByName(stored).withColumn(
            "content_hash", F.md5(F.to_json(F.struct(*[F.col(c) for c in contract]))))
        order = Window.partitionBy("event_id").orderBy("event_time", "content_hash", F.col("stored").desc(),
                                                       "_file", "_row")
        ranked = cands.withColumn("wins", F.row_number().over(order) == 1).cache()
        try:
            losers = ranked.where(F.col("stored") & ~F.col("wins")).select(
                "event_id", "file_id", "release", "date").collect()
            replaced = {(r["release"], r["date"]) for r in losers}
            winners = ranked.where(F.col("wins") & ~F.col("stored")).drop("stored", "_file", "_row", "content_hash",
                                                                           "wins")
            out.accepted = {int(r["_file"]): int(r["n"]) for r in ranked.where(F.col("wins") & ~F.col("stored"))
                            .groupBy("_file").agg(F.count("*").alias("n")).collect()}
            out.demoted = {}
            for r in losers:
                out.demoted[int(r["file_id"])] = out.demoted.get(int(r["file_id"]), 0) + 1
            new_days = {(r["release"], r["date"]) for r in winners.select("release", "date").distinct().collect()}
            parts = self.spark.createDataFrame(sorted(replaced), "release STRING, date STRING")
            winners.join(parts, ["release", "date"], "left_anti").write.partitionBy("release", "date").mode(
                "overwrite").parquet(self.warehouse.staged(batch, "events", "append").path)
            if replaced:
                lost = self.spark.createDataFrame([(r["event_id"], r["file_id"]) for r in losers],
                                                  "event_id STRING, file_id INT")
                kept = (self.engine.table("events").join(parts, ["release", "date"], "left_semi")
                        .join(lost, ["event_id", "file_id"], "left_anti"))
                kept.unionByName(winners.join(parts, ["release", "date"], "left_semi")).write.partitionBy(
                    "release", "date").mode("overwrite").parquet(self.warehouse.staged(batch, "events", "replace").path)
                out.clear = {"events": replaced}
            out.days = new_days | replaced
        finally:
            ranked.unpersist()
        return out

    def _failures(self, loaded: dict[int, _Read]) -> Any:
        """(_id, rule, rule_pos) of every broken rule of every row, as a DataFrame; None when no row broke one."""
        parts = []
        for i, r in loaded.items():
            if r.validation is not None and r.validation.failing_rows:
                parts.append(r.validation.failure_pairs(offset=0))
                t = parts[-1]
                parts[-1] = t.set_column(0, INDEX, pa.array((np.int64(i) << FILE_BITS)
                                                            + t.column(INDEX).to_numpy().astype(np.int64)))
        if not parts:
            return None
        return self.spark.createDataFrame(pa.concat_tables(parts))

    # ---------------------------------------------------------------- the DuckDB side

    def _commit(self, batch: str, manifest: list[tuple[int, FileResult, int, str]], manifest_ids: dict[int, int],
                reads: dict[int, _Read], results: dict[int, FileResult], stored: _Stored) -> None:
        with self.wh.writing() as con, db.transaction(con):
            rows = [(manifest_ids[i], result, size, sha) for i, result, size, sha in manifest]
            rows += [(r.file_id, results[r.index], r.size, r.sha) for r in reads.values()]
            for file_id, result, size, sha in rows:
                sqlfiles.run(con, "spark/insert_file", {
                    "file_id": file_id, "path": result.path, "size_bytes": size, "sha256": sha,
                    "rows_read": result.rows_read, "accepted": result.accepted, "quarantined": result.quarantined,
                    "duplicates": result.duplicates, "status": result.status, "reason": result.reason,
                    "extra_columns": result.extra_columns, "missing_columns": result.missing_columns,
                    "ingested_at": self.now})
            checks = [{"file_id": r.file_id, **asdict(x)} for r in reads.values()
                      if r.validation is not None and r.rejected is None for x in r.validation.results]
            if checks:
                con.register("batch_validations", pa.Table.from_pylist(checks))
                sqlfiles.run(con, "spark/insert_validations")
                con.unregister("batch_validations")
            for file_id, n in stored.demoted.items():
                sqlfiles.run(con, "spark/demote_file", {"file_id": file_id, "n": n})
            for release, day in sorted(stored.days):
                sqlfiles.run(con, "spark/mark_stale_day", {"release": release, "day": day})
            batches.commit(con, batch, "ingest", stored.clear, self.now)


@dataclass
class _Stored:
    """What staging a batch found: per file index, rows accepted; per stored file_id, rows demoted; the
    (release, day) partitions written; the partitions publish replaces."""

    accepted: dict[int, int] = field(default_factory=dict)
    demoted: dict[int, int] = field(default_factory=dict)
    days: set[tuple[str, str]] = field(default_factory=set)
    clear: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)


def ingest_spark(where: handle.Warehouse | Path, engine: SparkEngine, paths: list[Path], now: datetime | None = None,
                 progress: Progress | None = None, batch_files: int = DEFAULT_BATCH_FILES) -> Any:
    from pipeline.ingest.results import IngestResult

    landed = discover(paths)
    refused = [FileResult(r.path, "refused", reason=r.reason) for r in landed.refused]
    started = time.perf_counter()
    with handle.of(where, "ingest") as wh:
        result = IngestResult(SparkIngestor(wh, engine, now, batch_files).run(landed.files, progress) + refused)
    result.seconds = time.perf_counter() - started  # type: ignore[attr-defined]
    return result
