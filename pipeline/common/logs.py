"""Structured logs on stderr: one line per step, with its counts and duration.

    --log-format text   2026-12-02T02:00:03Z nightly step=ingest run=3 seconds=1.204 accepted=35983 ...
    --log-format json   {"ts": "2026-12-02T02:00:03Z", "event": "nightly", "step": "ingest", "run": 3, ...}

APScheduler's own records (e.g. "skipped: maximum number of running instances
reached") go through the same handler, with a `logger` field.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("pipeline")
LIBRARY_LOGGERS = ("apscheduler",)


class _Formatter(logging.Formatter):
    def __init__(self, fmt: str):
        super().__init__()
        self.fmt = fmt

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        fields: dict[str, Any] = getattr(record, "fields", {})
        if record.name != log.name:  # a library's record (apscheduler): say whose it is
            fields = {"logger": record.name, **fields}
        if self.fmt == "json":
            return json.dumps({"ts": ts, "level": record.levelname.lower(), "event": record.getMessage(), **fields},
                              default=str)
        pairs = " ".join(f"{k}={v}" for k, v in fields.items() if not isinstance(v, list | dict))
        return f"{ts} {record.getMessage()} {pairs}".rstrip()


def setup(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt))
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False
    for name in LIBRARY_LOGGERS:  # their warnings in the same format, not Python's plain-text fallback
        library = logging.getLogger(name)
        library.handlers[:] = [handler]
        library.setLevel(logging.WARNING)
        library.propagate = False


def event(name: str, **fields: Any) -> None:
    log.info(name, extra={"fields": fields})
