"""Clean stops on SIGTERM / SIGINT for the long-running commands.

The first signal asks the job to stop at the next safe point: ingest finishes
the file it is storing (one transaction) and stops before the next one; the run
is recorded as interrupted. A second signal stops at once: it raises
KeyboardInterrupt once, and the transaction in flight rolls back, so a file is
never half-loaded either way. Further signals are only noted: a second
KeyboardInterrupt raised inside the first one's cleanup would replace it (DuckDB
turns one into "Query interrupted"), and the exit must stay 130 (pipeline/cli/main.py treats
any error after a stop request as the stop).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

_stop = threading.Event()
_hard_stop = threading.Event()


class Interrupted(Exception):
    """The job stopped at a safe point because a stop was requested."""


def stop_requested() -> bool:
    return _stop.is_set()


def reset() -> None:
    _stop.clear()
    _hard_stop.clear()


def check() -> None:
    if _stop.is_set():
        raise Interrupted("stopped by a signal at a safe point")


def install(on_stop: threading.Event | None = None) -> None:
    """Route SIGTERM and SIGINT here (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if not _stop.is_set():
            _stop.set()
            if on_stop is not None:
                on_stop.set()
        elif not _hard_stop.is_set():
            _hard_stop.set()
            raise KeyboardInterrupt  # second signal: stop now, the open transaction rolls back

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
