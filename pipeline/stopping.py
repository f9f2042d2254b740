"""Clean stops on SIGTERM / SIGINT for the long-running commands.

The first signal asks the job to stop at the next safe point: ingest finishes
the file it is storing (one transaction) and stops before the next one; the run
is recorded as interrupted. A second signal stops at once: the transaction in
flight rolls back, so a file is never half-loaded either way.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

_stop = threading.Event()


class Interrupted(Exception):
    """The job stopped at a safe point because a stop was requested."""


def stop_requested() -> bool:
    return _stop.is_set()


def reset() -> None:
    _stop.clear()


def check() -> None:
    if _stop.is_set():
        raise Interrupted("stopped by a signal at a safe point")


def install(on_stop: threading.Event | None = None) -> None:
    """Route SIGTERM and SIGINT here (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if _stop.is_set():
            raise KeyboardInterrupt  # second signal: stop now, the open transaction rolls back
        _stop.set()
        if on_stop is not None:
            on_stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
