"""Finding landed files, and showing their names safely.

A folder is walked without following links. Every `*.parquet` entry whose real
path lies outside the folder (a symlink to a file or folder elsewhere, a link
to /etc/passwd) and every entry that is not a regular file (a FIFO would block
the read forever) is refused by name and never opened. A link whose target is
inside the folder is read through its real path.

File names may hold newlines or other control characters: `shown()` escapes
them, so one summary line stays one line.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.common.errors import UsageError

PATTERN_SUFFIX = ".parquet"


@dataclass
class Refused:
    path: str
    reason: str


@dataclass
class Landed:
    files: list[Path] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


def shown(name: str | Path) -> str:
    """`name` with control characters, and bytes that are not UTF-8, escaped the way repr() does."""
    text = str(name)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif 0xDC80 <= ord(ch) <= 0xDCFF:  # an undecodable byte (surrogateescape)
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        else:
            out.append(repr(ch)[1:-1])
    return "".join(out)


def _is_inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _walk(folder: Path, landed: Landed, seen: set[str]) -> None:
    root = os.path.realpath(folder)
    found: list[tuple[Path, bool]] = []  # (path, is a symlinked folder)
    for here, dirs, names in os.walk(folder, followlinks=False):
        for d in dirs:
            if os.path.islink(os.path.join(here, d)):
                found.append((Path(here, d), True))
        found.extend((Path(here, n), False) for n in names if n.endswith(PATTERN_SUFFIX))
    for path, linked_folder in sorted(found):
        real = os.path.realpath(path)
        if not _is_inside(real, root):
            what = "a folder" if linked_folder else "a file"
            landed.refused.append(Refused(str(path), f"a link to {what} outside the landing folder {root} "
                                                     f"({shown(real)}); not read"))
            continue
        if linked_folder:
            continue  # its files are inside the folder, found under their real path
        try:
            mode = os.stat(real).st_mode
        except OSError as exc:
            landed.refused.append(Refused(str(path), f"a link to {shown(real)}, which cannot be read: "
                                                     f"{exc.strerror}"))
            continue
        if not stat.S_ISREG(mode):
            landed.refused.append(Refused(str(path), "not a regular file; not read"))
            continue
        if real not in seen:
            seen.add(real)
            landed.files.append(Path(real) if path.is_symlink() else path)


def discover(paths: list[Path]) -> Landed:
    """Files named, plus every *.parquet inside each folder named (real path inside it), in a stable
    order; what a folder holds but may not be read is listed with the reason."""
    landed, seen = Landed(), set()
    for p in paths:
        if p.is_dir():
            _walk(p, landed, seen)
        elif p.is_file():
            real = os.path.realpath(p)
            if real not in seen:
                seen.add(real)
                landed.files.append(p)
        else:
            raise UsageError(f"no such file or folder: {shown(p)}")
    return landed
