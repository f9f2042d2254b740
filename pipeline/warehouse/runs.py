"""Which job runs are still alive. A run row is written `running` with its process's identity (pid, host and
the process's start time, so a reused pid is not mistaken for it); a run whose process is gone without
finishing (SIGKILL, the OOM killer, power loss) is `aborted`. Writers mark such rows when they open the
warehouse (db.connect_write); `pipeline runs` shows them as aborted even before; the nightly job reports the
aborted runs since the last finished one as a data-quality problem (exit 4)."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.warehouse import sqlfiles


def host() -> str:
    return socket.gethostname()


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux /proc), or None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22, counted after the command name


def identity() -> dict[str, Any]:
    """This process, as start_run records it."""
    return {"pid": os.getpid(), "host": host(), "proc_start": process_start(os.getpid())}


def alive(pid: int | None, run_host: str | None, proc_start: int | None) -> bool:
    """True unless the run's process is known to be gone: on another host (or unrecorded) it is assumed alive."""
    if pid is None or run_host != host():
        return pid is not None or run_host is not None
    if proc_start is not None and Path("/proc").is_dir():
        return process_start(pid) == proc_start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dead_runs(con: Any) -> list[tuple]:
    """(run_id, kind, started_at, pid) of the `running` rows whose process is gone."""
    return [(run_id, kind, started, pid) for run_id, kind, started, pid, run_host, proc_start
            in sqlfiles.run(con, "ingest/running_runs").fetchall() if not alive(pid, run_host, proc_start)]


def aborted_text(pid: int | None, found: datetime | None = None) -> str:
    """What an aborted run's error says: as `pipeline runs` shows a dead run at once, or (`found`: when a
    writer marked it) as stored."""
    who = f"its process (pid {pid}) ended" if pid else "its process ended"
    if found is None:
        return f"aborted: {who} without finishing the run"
    return (f"aborted: {who} without finishing the run (killed, out of memory or power lost); found "
            f"{found:%Y-%m-%d %H:%M:%S} UTC. Whole files it loaded are in; the next run loads the rest")


def mark_aborted(con: Any, now: datetime) -> int:
    """Mark the dead runs aborted, saying what is known; how many were marked."""
    dead = dead_runs(con)
    for run_id, _kind, _started, pid in dead:
        sqlfiles.run(con, "ingest/abort_run", {"run_id": run_id, "finished_at": now,
                                               "error": aborted_text(pid, found=now)})
    return len(dead)
