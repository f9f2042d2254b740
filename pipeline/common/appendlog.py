"""Appending whole lines to a file other programs read (the alerts' JSONL sink), so that a process killed
mid-append never costs a later record: before each append, a tail without its newline (a torn line, from
a writer that died after part of its write) is cut off into `<file>.torn` and reported; the new line is
then written with one write() and fsynced. `pending.py` keeps its own format, whose reader sets torn lines
aside the same way."""

from __future__ import annotations

import os
from pathlib import Path

_CHUNK = 64 * 1024


def torn_path(path: Path) -> Path:
    return path.with_name(path.name + ".torn")


def append_line(path: Path, line: bytes) -> str | None:
    """Append `line` (one record; a newline is added if it lacks one). Returns a warning naming the torn
    tail it repaired first, else None."""
    if not line.endswith(b"\n"):
        line += b"\n"
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        warning = _repair(fd, path)
        os.write(fd, line)
        os.fsync(fd)
        return warning
    finally:
        os.close(fd)


def _repair(fd: int, path: Path) -> str | None:
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return None
    cut = 0  # just after the last newline, found by reading backwards
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            cut = start + at + 1
            break
        end = start
    torn = os.pread(fd, size - cut, cut)
    with torn_path(path).open("ab") as fh:
        fh.write(torn + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.ftruncate(fd, cut)
    return (f"{path}: its last line was cut short by an interrupted append ({len(torn):,} bytes, not a whole "
            f"record); moved to {torn_path(path)} before appending")
