"""`<db>.pending-evaluations.jsonl` (and `<db>.pending-actions.jsonl`, for rollout actions): evaluations
that found the database held by another writer wait here, one JSON object a line, until the next writer
folds them in. Every function takes the queue: EVALUATIONS (the default) or ACTIONS.

- append: under an flock on `<db>.pending-evaluations.lock`, one whole line, flushed
  and fsynced before the lock is released;
- take: under the same lock the file is renamed (atomic) to
  `<db>.pending-evaluations.folding-<pid>-<n>`, so an append either lands before the
  rename (and is taken) or after it (in a new file, for the next fold); the lines
  are then read without the lock;
- a line that is not a whole JSON object (a crash mid-write, a hand edit) is moved
  to `<db>.pending-evaluations.rejected` with a warning, never blocking later runs;
- done: the folding file is removed once its rows are committed. A fold that
  crashed before that leaves its file behind; the next take picks it up again
  (the evaluations carry an id, so a row committed twice is stored once).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

_folds = count()


@dataclass(frozen=True)
class Queue:
    name: str
    needed: frozenset[str]  # the keys of a whole row


EVALUATIONS = Queue("evaluations", frozenset({"evaluation_uid", "release", "as_of", "evaluated_at", "verdict",
                                             "result"}))
ACTIONS = Queue("actions", frozenset({"action_id", "release", "segment", "action", "reason", "actor", "taken_at"}))


def pending_path(db_path: Path, queue: Queue = EVALUATIONS) -> Path:
    return Path(f"{db_path}.pending-{queue.name}.jsonl")


def rejected_path(db_path: Path, queue: Queue = EVALUATIONS) -> Path:
    return Path(f"{db_path}.pending-{queue.name}.rejected")


@contextmanager
def _locked(db_path: Path, queue: Queue) -> Iterator[None]:
    fd = os.open(f"{db_path}.pending-{queue.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held for a write or a rename only: milliseconds
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def append(db_path: Path, row: dict[str, Any], queue: Queue = EVALUATIONS) -> None:
    line = (json.dumps(row) + "\n").encode()
    with _locked(db_path, queue):
        fd = os.open(pending_path(db_path, queue), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass
class Taken:
    rows: list[dict[str, Any]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    rejected: int = 0
    warnings: list[str] = field(default_factory=list)


def take(db_path: Path, queue: Queue = EVALUATIONS) -> Taken:
    """The waiting rows, oldest first; their files stay until done()."""
    pending = pending_path(db_path, queue)
    taken = Taken()
    with _locked(db_path, queue):
        leftovers = sorted(_folding(pending), key=lambda p: p.stat().st_mtime)
        if pending.exists():
            folding = pending.with_name(f"{pending.name.removesuffix('.jsonl')}.folding-{os.getpid()}-"
                                        f"{next(_folds)}")
            pending.rename(folding)
            leftovers.append(folding)
    for path in leftovers:
        taken.files.append(path)
        bad = []
        for number, line in enumerate(path.read_bytes().splitlines(keepends=True), 1):
            row = _parse(line, queue)
            if row is None:
                bad.append(line if line.endswith(b"\n") else line + b"\n")
                taken.warnings.append(f"{pending}: line {number} is not a whole {queue.name.removesuffix('s')}; "
                                      f"set aside in {rejected_path(db_path, queue)}")
            else:
                taken.rows.append(row)
        if bad:
            with rejected_path(db_path, queue).open("ab") as fh:
                fh.writelines(bad)
            taken.rejected += len(bad)
    return taken


def peek(db_path: Path, queue: Queue) -> list[dict[str, Any]]:
    """The whole rows waiting (in the file and in folds under way), read without taking them: what a reader
    adds to the stored ones."""
    pending = pending_path(db_path, queue)
    rows = []
    for path in [*_folding(pending), pending]:
        try:
            lines = path.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            continue
        rows += [row for row in map(lambda line: _parse(line, queue), lines) if row is not None]
    return rows


def _folding(pending: Path) -> list[Path]:
    """The files of folds under way (or crashed) beside the pending file."""
    return list(pending.parent.glob(pending.name.removesuffix(".jsonl") + ".folding-*"))


def _parse(line: bytes, queue: Queue) -> dict[str, Any] | None:
    if not line.endswith(b"\n"):
        return None  # the writer died mid-line
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and queue.needed <= row.keys() else None


def done(taken: Taken) -> None:
    for path in taken.files:
        path.unlink(missing_ok=True)
