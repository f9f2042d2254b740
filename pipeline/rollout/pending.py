"""`<db>.pending-evaluations.jsonl`: evaluations that found the database held by
another writer wait here, one JSON object a line, until the next stored one folds them in.

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


def pending_path(db_path: Path) -> Path:
    return Path(f"{db_path}.pending-evaluations.jsonl")


def rejected_path(db_path: Path) -> Path:
    return Path(f"{db_path}.pending-evaluations.rejected")


@contextmanager
def _locked(db_path: Path) -> Iterator[None]:
    fd = os.open(f"{db_path}.pending-evaluations.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held for a write or a rename only: milliseconds
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def append(db_path: Path, row: dict[str, Any]) -> None:
    line = (json.dumps(row) + "\n").encode()
    with _locked(db_path):
        fd = os.open(pending_path(db_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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


def take(db_path: Path) -> Taken:
    """The waiting rows, oldest first; their files stay until done()."""
    pending = pending_path(db_path)
    taken = Taken()
    with _locked(db_path):
        leftovers = sorted(pending.parent.glob(pending.name.removesuffix(".jsonl") + ".folding-*"),
                           key=lambda p: p.stat().st_mtime)
        if pending.exists():
            folding = pending.with_name(f"{pending.name.removesuffix('.jsonl')}.folding-{os.getpid()}-"
                                        f"{next(_folds)}")
            pending.rename(folding)
            leftovers.append(folding)
    for path in leftovers:
        taken.files.append(path)
        bad = []
        for number, line in enumerate(path.read_bytes().splitlines(keepends=True), 1):
            row = _parse(line)
            if row is None:
                bad.append(line if line.endswith(b"\n") else line + b"\n")
                taken.warnings.append(f"{pending}: line {number} is not a whole evaluation; set aside in "
                                      f"{rejected_path(db_path)}")
            else:
                taken.rows.append(row)
        if bad:
            with rejected_path(db_path).open("ab") as fh:
                fh.writelines(bad)
            taken.rejected += len(bad)
    return taken


def _parse(line: bytes) -> dict[str, Any] | None:
    if not line.endswith(b"\n"):
        return None  # the writer died mid-line
    try:
        row = json.loads(line)
    except ValueError:
        return None
    needed = {"evaluation_uid", "release", "as_of", "evaluated_at", "verdict", "result"}
    return row if isinstance(row, dict) and needed <= row.keys() else None


def done(taken: Taken) -> None:
    for path in taken.files:
        path.unlink(missing_ok=True)
