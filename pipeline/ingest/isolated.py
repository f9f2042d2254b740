"""Untrusted Parquet read in worker processes: a native crash, a hang or a runaway allocation while
reading one landed file rejects that file, with what happened, and the run goes on.

`reading.check` (hash; then footer, page checksums, every row decoded by pyarrow) runs in a pool of worker
processes (`python -m pipeline.ingest.isolated`), one file at a time each. A worker lives under a memory limit
(RLIMIT_DATA, which counts the heap and anonymous mappings, not the shared libraries); the parent gives
it a time limit per file. When a worker dies by a signal, exceeds the time or runs out of memory, its
file is rejected (`reader crashed (SIGABRT): <its last words>`, `reader exceeded 60 s`,
`reader exceeded 2 GB`) and the next file gets a fresh worker. DuckDB stages only files a worker has
decoded whole. A run's workers that end it healthy are kept, idle, for the next run of the same process (a
scheduler starts them once); a worker's stdin closes when its parent exits, and it exits too.

The two sides speak JSON lines (never pickle: a worker that untrusted bytes have taken over must not
be able to run code in the parent). The environment variable PIPELINE_READER_HOOK=<file.py>:<function>
makes each worker call that function with the path before reading it: the tests' fault injection.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pipeline.common import stopping
from pipeline.ingest import reading
from pipeline.warehouse.schema import Column, Schema

HOOK_ENV = "PIPELINE_READER_HOOK"
_AHEAD = 8  # files read ahead of the one the caller waits for
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2  # this process may use
# bytes to read before one more worker pays: a worker takes ~0.4 s of CPU to start (Python, pyarrow, DuckDB),
# about what reading this much takes it, so a run of a few small files is read by one
BYTES_PER_WORKER = 32 << 20


@dataclass(frozen=True)
class ReaderLimits:
    """What one landed file may cost its reader (`pipeline ingest --reader-timeout/--reader-memory`)."""

    seconds: float = 60.0
    memory_mb: int = 2048
    workers: int = max(1, CORES)

    @property
    def memory_text(self) -> str:
        return f"{self.memory_mb // 1024} GB" if self.memory_mb % 1024 == 0 else f"{self.memory_mb} MB"


def _to_json(checked: reading.Checked) -> dict[str, Any]:
    return {"path": str(checked.path), "sha": checked.sha, "size": checked.size, "known": checked.known,
            "rows": checked.rows, "reason": checked.reason, "extra": checked.extra, "missing": checked.missing,
            "layout": checked.layout,
            "casts": [[col.name, at, macro] for col, at, macro in checked.casts]}


def _from_json(raw: dict[str, Any], schema: Schema) -> reading.Checked:
    casts = tuple((schema.column(name), int(at), macro) for name, at, macro in raw["casts"])
    return reading.Checked(Path(raw["path"]), raw["sha"], int(raw["size"]), bool(raw["known"]), int(raw["rows"]),
                           raw["reason"], casts, list(raw["extra"]), list(raw["missing"]), str(raw["layout"]))


class _WorkerDied(Exception):
    """The worker ended without an answer: `reason` says how."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Worker:
    """One worker process. Started for one run's readers, it is kept for the next run of this process while it is
    healthy (_parked): a scheduler, or a test suite, pays its start once."""

    def __init__(self, schema: Schema, limits: ReaderLimits, key: tuple):
        self._limits, self.key = limits, key
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.ingest.isolated"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, start_new_session=True)  # a Ctrl-C in the terminal reaches the parent only
        self._send({"columns": [[c.name, c.type, c.nullable] for c in schema.columns], "memory_mb": limits.memory_mb})

    def alive(self) -> bool:
        return self._proc.poll() is None

    def decide(self, decided: frozenset[str], limits: ReaderLimits) -> None:
        """A new run: the sha256s its manifest already holds (their files are hashed, not parsed), its time limit."""
        self._limits = limits
        self._send({"decided": sorted(decided)})

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message).encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: the answer's read says how

    def check(self, path: Path) -> dict[str, Any]:
        """The worker's verdict on one file; _WorkerDied when it crashed or ran out of time."""
        assert self._proc.stdout is not None
        self._send({"path": str(path)})
        ready, _, _ = select.select([self._proc.stdout], [], [], self._limits.seconds)
        if not ready:  # still reading: the pool retires (kills) it
            raise _WorkerDied(f"reader exceeded {self._limits.seconds:g} s")
        line = self._proc.stdout.readline()
        if not line:
            raise _WorkerDied(self._death())
        return json.loads(line)

    def _death(self) -> str:
        code = self._proc.wait()
        self._stderr.seek(0)
        words = [w for w in self._stderr.read().decode(errors="replace").splitlines() if w.strip()]
        last = words[-1].strip()[:200] if words else ""
        if "bad_alloc" in last or "MemoryError" in last:
            return f"reader exceeded {self._limits.memory_text}"
        how = signal.Signals(-code).name if code < 0 and -code in signal.valid_signals() else f"exit {code}"
        return f"reader crashed ({how})" + (f": {last}" if last else "")

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()

    def close(self) -> None:
        self.kill()
        self._proc.wait()
        for fh in (self._proc.stdin, self._proc.stdout, self._stderr):
            if fh is not None:
                fh.close()


class ReaderPool:
    """`checked(paths)` yields each file's reading.Checked, in order, read by `limits.workers` workers."""

    def __init__(self, schema: Schema, decided: frozenset[str], limits: ReaderLimits | None = None):
        self._schema, self._decided = schema, decided
        self._limits = limits or ReaderLimits()
        # a parked worker serves a run only if it was started the same way: the same columns and memory limit
        self._key = (schema.columns, self._limits.memory_mb)
        self._jobs: queue.Queue[tuple[int, Path] | None] = queue.Queue()
        self._done: dict[int, reading.Checked] = {}
        self._ready = threading.Condition()
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._busy: set[_Worker] = set()  # reading a file now: close() kills them, ending any wait on them

    def __enter__(self) -> ReaderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the workers reading a file (it is abandoned) and the threads; idle workers are parked."""
        self._closed.set()
        with self._ready:
            for worker in self._busy:
                worker.kill()
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._threads = []

    def _serve(self) -> None:
        worker: _Worker | None = None
        try:
            while (job := self._jobs.get()) is not None and not self._closed.is_set():
                index, path = job
                if worker is None:
                    worker = _unparked(self._key) or _Worker(self._schema, self._limits, self._key)
                    worker.decide(self._decided, self._limits)
                with self._ready:
                    self._busy.add(worker)
                try:
                    checked = _from_json(worker.check(path), self._schema)
                except _WorkerDied as died:
                    worker.close()
                    checked = self._rejected(path, died.reason)
                with self._ready:
                    self._busy.discard(worker)
                    if not worker.alive():
                        worker = None
                    self._done[index] = checked
                    self._ready.notify_all()
        finally:
            if worker is not None:
                _park(worker)

    def _rejected(self, path: Path, reason: str) -> reading.Checked:
        """A file its reader died on: rejected with how, its sha256 kept so the same bytes are not read again."""
        sha, size = reading.sha256_of(path), path.stat().st_size  # plain hashing: no parser touches the bytes
        if sha in self._decided:
            return reading.Checked(path, sha, size, known=True)
        return reading.Checked(path, sha, size, rows=0, reason=reading.unreadable(path, reason))

    def checked(self, paths: list[Path]) -> Iterator[reading.Checked]:
        if not self._threads:
            count = workers_for(paths, self._limits)
            self._threads = [threading.Thread(target=self._serve, daemon=True) for _ in range(count)]
            for thread in self._threads:
                thread.start()
        submitted = 0
        for index in range(len(paths)):
            while submitted < len(paths) and submitted <= index + _AHEAD:
                self._jobs.put((submitted, paths[submitted]))
                submitted += 1
            with self._ready:
                while index not in self._done:
                    if self._closed.is_set():
                        raise stopping.Interrupted("the ingest run ended")
                    self._ready.wait(0.1)
                checked = self._done.pop(index)
            yield checked


_parked: list[_Worker] = []  # idle workers of this process, all of one key (the last run's)
_parking = threading.Lock()


def _unparked(key: tuple) -> _Worker | None:
    with _parking:
        while _parked:
            worker = _parked.pop()
            if worker.key == key and worker.alive():
                return worker
            worker.close()
    return None


def _park(worker: _Worker) -> None:
    """Keep an idle worker for the next run (a worker's stdin closes when this process ends, and it exits);
    workers started another way, or past one per core, are ended."""
    with _parking:
        ending = [w for w in _parked if w.key != worker.key]
        _parked[:] = [w for w in _parked if w.key == worker.key]
        if worker.alive() and len(_parked) < CORES and not os.environ.get(HOOK_ENV):  # a hook reads its environment
            _parked.append(worker)
        else:
            ending.append(worker)
    for w in ending:
        w.close()


@atexit.register
def _end_parked() -> None:
    """At a normal exit (the CLI leaves by os._exit, and the workers by their stdin's end) the parked workers end
    and are waited for, not left to the interpreter's finalizers."""
    with _parking:
        ending, _parked[:] = list(_parked), []
    for worker in ending:
        worker.close()


def workers_for(paths: list[Path], limits: ReaderLimits) -> int:
    """How many workers read `paths`: limits.workers at most, one per file at most, one per BYTES_PER_WORKER."""
    size = 0
    for path in paths:
        with contextlib.suppress(OSError):  # a file gone by now: its reader says so
            size += path.stat().st_size
    return max(1, min(limits.workers, len(paths), -(-size // BYTES_PER_WORKER)))


# --- the worker side: `python -m pipeline.ingest.isolated` ---------------------------------------------------


def _hook() -> Any:
    spec = os.environ.get(HOOK_ENV)
    if not spec:
        return None
    import importlib.util

    file, _, name = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location("pipeline_reader_hook", file)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)


def serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a run stops
    hello = json.loads(sys.stdin.readline())
    limits = ReaderLimits(memory_mb=hello["memory_mb"])
    limit = limits.memory_mb << 20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    schema = Schema(0, "", tuple(Column(n, t, nullable) for n, t, nullable in hello["columns"]), ())
    decided: frozenset[str] = frozenset()
    hook = _hook()
    for line in sys.stdin:  # ends when the parent closes it, or exits
        message = json.loads(line)
        if "decided" in message:  # a new run
            decided = frozenset(message["decided"])
            continue
        path = Path(message["path"])
        try:
            checked = reading.check(path, schema, decided, before_read=hook)
        except MemoryError:
            checked = reading.Checked(path, reading.sha256_of(path), path.stat().st_size, rows=0,
                                      reason=f"reader exceeded {limits.memory_text}")
        sys.stdout.write(json.dumps(_to_json(checked)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
