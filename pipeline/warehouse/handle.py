"""One run's warehouse: the handle a command or the nightly job opens once and passes to every step.

It holds the writer lock for the run (taken when the handle is entered; a second writer is told at once)
and is the only thing that opens the file: `writing()` read-write for one step's transaction, `attached()`
the same into another connection (ingest's staging database), `reading()` read-only. DuckDB lets no other
process open a file that one process holds read-write, so a step's connection closes when the step ends and
a reader (the CI gate) gets in between steps; the tables and views are put in place, and the runs of dead
processes settled, on the run's first opening only. `let_go()` releases the lock before the run waits on
the network (alert delivery); a later `writing()` takes it back, waiting up to the busy timeout.

When the run lets go of the file (its end, `let_go()`) and after a write at most every PUBLISH_EVERY_S during a
long run, it publishes a snapshot for readers (pipeline/warehouse/snapshots.py).

Steps take `Warehouse | Path`: a script or a test may pass a path. `of()` opens a handle on it that holds the
lock for that one call; `handle_of()` one that takes the lock per session (alert delivery, recording a verdict:
neither may hold it while waiting)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import duckdb

from pipeline.common import logs
from pipeline.common.errors import PipelineError
from pipeline.warehouse import db, snapshots


class Warehouse:
    def __init__(self, path: Path, command: str):
        self.path = Path(path)
        self.command = command
        self.opened = 0  # read-write openings of the file by this run
        self._prepared = False
        self._lock = ExitStack()
        self._running = False  # the run holds the writer lock (entered, not let go)
        self._unpublished = False  # a write since the last snapshot
        self._published_at = time.monotonic()

    def __enter__(self) -> Warehouse:
        self._lock.enter_context(db.writer_lock(self.path, self.command))
        self._running = True
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.let_go(publish=exc_type is None)  # a failed run's commits are published by the next writer

    def let_go(self, publish: bool = True) -> None:
        """Publish what the run wrote and release the writer lock (before waiting on the network);
        writing() takes it back."""
        try:
            if self._running and publish:
                self._publish()
        finally:
            self._running = False
            self._lock.close()

    def _publish(self) -> None:
        """A snapshot of what was written, for readers; a failure (a full disk) is a warning, never the run's."""
        if not self._unpublished:
            return
        self._unpublished = False
        self._published_at = time.monotonic()
        try:
            snapshots.publish(self.path)
        except (OSError, PipelineError) as exc:
            logs.log.warning(f"could not publish a snapshot of {self.path} for readers: {exc}; "
                             "they read the previous one while a writer holds it")

    @contextmanager
    def _session(self, lock_wait: float | None, publish: bool = True) -> Iterator[bool]:
        with db.writer_lock(self.path, self.command, wait=db.busy_timeout() if lock_wait is None else lock_wait):
            prepare = not self._prepared
            yield prepare
            self._prepared = True
            if not publish:
                return
            self._unpublished = True
            if not self._running or time.monotonic() - self._published_at >= snapshots.PUBLISH_EVERY_S:
                self._publish()  # the file is closed here: the step's connection ended inside the session

    @contextmanager
    def writing(self, lock_wait: float | None = None, publish: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """The file read-write for one step, waiting up to the busy timeout for another process's brief hold
        on it. `lock_wait`: how long to wait for the writer lock when the run has let go of it (default: the
        busy timeout). `publish` False: what it writes is bookkeeping readers need not see at once (alert
        delivery), published by the next write."""
        with self._session(lock_wait, publish) as prepare:
            con = db.connect_write(self.path, prepare=prepare)
            self.opened += 1
            try:
                yield con
            finally:
                con.close()

    @contextmanager
    def attached(self, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        """The file attached read-write to `con` as its default database, for one transaction (ingest's)."""
        with self._session(None) as prepare, db.attached(con, self.path, prepare=prepare):
            self.opened += 1
            yield

    @contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with db.reading(self.path) as con:
            yield con


def handle_of(where: Warehouse | Path, command: str) -> Warehouse:
    """`where` itself, or a handle on that path that holds no lock: each writing() takes it for its session."""
    return where if isinstance(where, Warehouse) else Warehouse(Path(where), command)


@contextmanager
def of(where: Warehouse | Path, command: str) -> Iterator[Warehouse]:
    """`where` itself, or a handle on that path for this one call, holding the writer lock throughout."""
    if isinstance(where, Warehouse):
        yield where
        return
    with Warehouse(Path(where), command) as wh:
        yield wh
