"""What the benchmarks share: running one step in its own process, timed, with its own peak RSS."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent


class Timed(NamedTuple):
    seconds: float
    rss_mb: float  # peak RSS of that process alone
    stdout: str
    code: int
    cpu_seconds: float  # user + system time of that process: what it cost, whatever else the machine ran


def timed(cmd: list[str], ok: tuple[int, ...] = (0,)) -> Timed:
    """One command in its own process, timed. Under `python -c` DuckDB counts as interactive and prints
    a progress bar (a line of \\r updates) to stdout: such lines are dropped."""
    with tempfile.TemporaryFile("w+", newline="") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode not in ok:
            shown = " ".join(cmd[3:] if cmd[1] == "-c" else cmd[1:])
            sys.exit(f"benchmark step failed (exit {proc.returncode}): {shown}\n{err.read()}")
        stdout = "\n".join(line for line in out.read().split("\n") if "\r" not in line)
        return Timed(elapsed, usage.ru_maxrss / 1024, stdout, proc.returncode,  # Linux reports KiB
                     usage.ru_utime + usage.ru_stime)
