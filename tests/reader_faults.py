"""Faults injected into the isolated reader (PIPELINE_READER_HOOK=<this file>:inject): each worker calls
`inject(path)` before reading a landed file, and the file's name says what goes wrong. Every call is logged
(READER_FAULTS_LOG) first, so a test can tell which files a run read at all."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path


def inject(path: Path) -> None:
    log = os.environ.get("READER_FAULTS_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(path.name + "\n")
    name = path.name
    if name.startswith("abort"):
        os.abort()
    if name.startswith("segv"):
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    if name.startswith("hang"):
        time.sleep(3600)
    if name.startswith("arrow_hog"):
        import pyarrow as pa

        pa.allocate_buffer(3 << 30)  # Arrow's allocator, past the worker's memory limit
    if name.startswith("python_hog"):
        bytearray(3 << 30)
