"""Snapshots of the warehouse that readers read while a writer holds it (docs/writer-lock.md, "Snapshots").

DuckDB lets no process open a file another one holds read-write, so while the nightly job writes, `gate`,
`explain`, `state`, `history`, `report`, `query` and `sql` read the newest snapshot instead: a byte copy of the
whole warehouse file in `<db>.snapshots/<id>.duckdb`, taken by the writer while it holds the writer lock and
has the file closed (every transaction committed and checkpointed), so the copy is a consistent warehouse. A
copy of the file costs about what the disk does (1.2 GB, 20M events: 0.9 s here, `bench/snapshots.py`); serving
the tables through DuckDB's COPY FROM DATABASE took 20 s for the same file.

- publish: copy to `.tmp-<id>` beside them, fsync, chmod read-only, rename (atomic): a writer killed mid-copy
  leaves only a temporary file, which the next publish removes; readers never see a partial snapshot.
- a writer publishes when its run lets go of the warehouse, and during a long run after a write at most every
  PUBLISH_EVERY_S seconds;
- the newest `PIPELINE_SNAPSHOTS` (default 2) are kept, older ones removed; a reader that opened one keeps
  reading it after removal (its open file lives on). 0 publishes none (readers then wait, as before).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.common import clock
from pipeline.common.errors import UsageError

KEEP_ENV = "PIPELINE_SNAPSHOTS"
DEFAULT_KEEP = 2
PUBLISH_EVERY_S = 60.0
_ID_FORMAT = "%Y%m%dT%H%M%S.%fZ"
# Tests only (the variable db.py's "checkpoint" fault reads too): "publish" stops a publish halfway through its
# copy, so a test can kill it there.
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
    for leftover in where.glob(".tmp-*"):  # a publish killed midway; only the lock holder publishes
        leftover.unlink(missing_ok=True)
    snapshot_id = clock.wall().strftime(_ID_FORMAT)
    final = where / f"{snapshot_id}.duckdb"
    tmp = where / f".tmp-{snapshot_id}"
    _copy(db_path, tmp)
    wal = Path(f"{db_path}.wal")  # left only when a checkpoint failed: its commits live there
    if wal.exists():
        _copy(wal, Path(f"{tmp}.wal"))
        os.rename(f"{tmp}.wal", f"{final}.wal")
    os.rename(tmp, final)
    _fsync_dir(where)
    for old in published(db_path)[:-kept]:
        old.path.unlink(missing_ok=True)
        Path(f"{old.path}.wal").unlink(missing_ok=True)
    return Snapshot(final)


def _copy(source: Path, target: Path) -> None:
    if os.environ.get(FAULT_ENV) == "publish":
        with source.open("rb") as src, target.open("wb") as dst:
            dst.write(src.read(max(1, source.stat().st_size // 2)))
            dst.flush()
            time.sleep(600)
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(target, 0o444)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
