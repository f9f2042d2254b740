"""The Spark warehouse's tables: hive-partitioned Parquet under one root (`--warehouse`, else `<db>.spark/`).

    events/release=R/date=D/          the valid, deduplicated rows (date = UTC day of event_time)
    quarantine/date=D/                rows that broke rules (date = the day they were quarantined)
    rollup_daily/release=R/date=D/    the daily rollup
    rollup_hist/release=R/date=D/     its log-bucket histograms (the mergeable quantile partials)
    rollup_device_day/release=R/date=D/  per device-day and group, the counts and sums the gate reads
    _staging/<batch>/<table>.<mode>/  a batch written by Spark, not yet published

Partition columns are read as strings (partition type inference is off in every session), so `release=4.10`
stays "4.10". The bookkeeping (files, validations, runs, evaluations, alerts, rollout state) stays in the
small transactional DuckDB file; these tables hold only what is too big for it.

Why plain Parquet and not Delta Lake or Iceberg: both need JARs from Maven Central (not on PyPI, so not in
`pip install .[spark]`, and unreachable from machines that only see a package mirror), and their one benefit
here, atomic multi-partition commits, is covered by a two-step commit through the DuckDB file:

1. Spark writes the batch under _staging/<batch>/ (a job that fails leaves only staging behind);
2. the DuckDB transaction that stores the batch's manifest rows records the batch as committed
   (`spark_batches`);
3. publish moves the staged files into the table's partitions (`append`), or first empties the partitions
   the batch replaces (`replace`: a rollup day, an events day that lost a replaced copy), then marks the
   batch published and removes its staging folder.

A writer starting after a crash rolls committed batches forward (publish again: every step is idempotent)
and deletes staging folders of batches DuckDB never committed (`recover`). What is not covered: a reader
running during step 3 can see a replaced partition empty, or twice, for the milliseconds of the moves; on an
object store, where a move is a copy, for longer. That gap is the case for a table format (docs/spark-plan.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from pipeline.common.config import Config
from pipeline.common.errors import UsageError, first_line

PARTITIONS = {"events": ("release", "date"), "quarantine": ("date",),
              "rollup_daily": ("release", "date"), "rollup_hist": ("release", "date"),
              "rollup_device_day": ("release", "date")}
TABLES = tuple(PARTITIONS)
STAGING = "_staging"


def default_root(db_path: Path) -> str:
    return str(db_path.with_name(db_path.name + ".spark") if db_path.suffix != ".duckdb"
               else db_path.with_suffix(".spark"))


@dataclass(frozen=True)
class Staged:
    """One table's part of a batch: where Spark writes it, and how publish lands it."""

    table: str
    mode: str  # append | replace
    path: str  # for Spark (a URI)


class SparkTables:
    """The Parquet root: paths for Spark (URIs) and file operations for publish (pyarrow.fs: local, HDFS, S3,
    GCS; Spark's s3a:// is S3 to pyarrow)."""

    def __init__(self, root: str):
        self.root = root.rstrip("/")
        parsed = urlparse(self.root)
        if parsed.scheme in ("", "file"):
            local = Path(parsed.path if parsed.scheme else self.root).resolve()
            self.fs: Any = pafs.LocalFileSystem()
            self.base = str(local)
            self.uri = local.as_uri()
        else:
            fs_uri = self.root.replace("s3a://", "s3://", 1)
            try:
                self.fs, self.base = pafs.FileSystem.from_uri(fs_uri)
            except Exception as exc:  # pyarrow: ArrowInvalid for an unknown scheme, OSError for a missing library
                raise UsageError(f"--warehouse {self.root}: not a location pyarrow can reach "
                                 f"({first_line(exc)}); use a folder, hdfs://, s3a:// or gs://") from None
            self.uri = self.root

    def __str__(self) -> str:
        return self.root

    def table_uri(self, table: str) -> str:
        return f"{self.uri}/{table}"

    def _path(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    def staged(self, batch: str, table: str, mode: str) -> Staged:
        return Staged(table, mode, f"{self.uri}/{STAGING}/{batch}/{table}.{mode}")

    def ensure(self) -> None:
        try:
            self.fs.create_dir(self.base, recursive=True)
        except OSError as exc:
            raise UsageError(f"--warehouse {self.root}: cannot create it: {exc}") from None

    def _files(self, path: str) -> list[pafs.FileInfo]:
        info = self.fs.get_file_info(path)
        if info.type != pafs.FileType.Directory:
            return []
        return [f for f in self.fs.get_file_info(pafs.FileSelector(path, recursive=True))
                if f.type == pafs.FileType.File]

    def has_data(self, table: str) -> bool:
        return any(f.base_name.endswith(".parquet") for f in self._files(self._path(table)))

    def partitions(self, table: str) -> list[tuple[str, ...]]:
        """The partition values present, e.g. ("4.12", "2026-11-24") for events."""
        found = set()
        root = self._path(table)
        for f in self._files(root):
            if not f.base_name.endswith(".parquet"):
                continue
            parts = f.path[len(root) + 1:].split("/")[:-1]
            found.add(tuple(p.partition("=")[2] for p in parts))
        return sorted(found)

    def partition_folder(self, table: str, values: tuple[str, ...]) -> str:
        return self._path(table, *(f"{n}={v}" for n, v in zip(PARTITIONS[table], values, strict=True)))

    def read_partition(self, table: str, values: tuple[str, ...]) -> pa.Table:
        """One partition's rows, without its partition columns (they are in the folder names)."""
        import pyarrow.parquet as pq

        return pa.concat_tables([pq.read_table(f.path, filesystem=self.fs) for f in self._parquet_files(table, values)],
                                promote_options="default")

    def _parquet_files(self, table: str, values: tuple[str, ...]) -> list[pafs.FileInfo]:
        return [f for f in self._files(self.partition_folder(table, values)) if f.base_name.endswith(".parquet")]

    def partition_rows(self, table: str, values: tuple[str, ...]) -> int:
        """One partition's row count, from its files' footers."""
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(self.fs.open_input_file(f.path)).metadata.num_rows
                   for f in self._parquet_files(table, values))

    def drop_partition(self, table: str, values: tuple[str, ...]) -> None:
        folder = self.partition_folder(table, values)
        if self.fs.get_file_info(folder).type == pafs.FileType.Directory:
            self.fs.delete_dir(folder)

    def staged_batches(self) -> list[str]:
        path = self._path(STAGING)
        if self.fs.get_file_info(path).type != pafs.FileType.Directory:
            return []
        return sorted(f.base_name for f in self.fs.get_file_info(pafs.FileSelector(path))
                      if f.type == pafs.FileType.Directory)

    def publish(self, batch: str, clear: dict[str, set[tuple[str, ...]]] | None = None) -> int:
        """Land a committed batch: empty the partitions named in `clear` (per table), then move every staged
        Parquet file into its partition under a name that carries the batch id. Returns files moved. Safe to
        repeat after a crash: a moved file is not moved again, and a file of this batch is never cleared."""
        clear = clear or {}
        for table, parts in clear.items():
            for values in parts:
                for f in self._files(self.partition_folder(table, values)):
                    if not f.base_name.startswith(f"{batch}-"):
                        self.fs.delete_file(f.path)
        moved = 0
        staging = self._path(STAGING, batch)
        for f in self._files(staging):
            if not f.base_name.endswith(".parquet"):
                continue
            rel = f.path[len(staging) + 1:].split("/")
            table, _, mode = rel[0].rpartition(".")
            if table not in TABLES or mode not in ("append", "replace"):
                continue  # the batch's working files (the ingest's cast rows): dropped with the staging folder
            target_dir = self._path(table, *rel[1:-1])
            self.fs.create_dir(target_dir, recursive=True)
            self.fs.move(f.path, f"{target_dir}/{batch}-{rel[-1]}")
            moved += 1
        self.discard(batch)
        return moved

    def discard(self, batch: str) -> None:
        path = self._path(STAGING, batch)
        if self.fs.get_file_info(path).type == pafs.FileType.Directory:
            self.fs.delete_dir(path)


def new_batch_id() -> str:
    """Sortable and unique: the staging folder and the prefix of every file the batch lands."""
    from datetime import UTC, datetime

    return f"b{datetime.now(UTC):%Y%m%dT%H%M%S}{os.urandom(4).hex()}"


def tables_of(db_path: Path, config: Config, warehouse: str | None = None) -> SparkTables:
    """The Spark tables of the warehouse whose bookkeeping is `db_path`: `warehouse` (--warehouse), else
    engine.spark.warehouse, else <db>.spark/ beside the DuckDB file."""
    return SparkTables(warehouse or config.engine.spark.warehouse or default_root(db_path))
