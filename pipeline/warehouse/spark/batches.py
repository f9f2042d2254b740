"""The two-step commit of a Spark batch (pipeline/warehouse/spark/storage.py): committed in the DuckDB file with the
bookkeeping rows it belongs to, then published into the Parquet partitions; `recover` finishes or drops what a
crash left behind. The DuckDB side goes through the run's handle (pipeline/warehouse/handle.py), which holds
the writer lock throughout."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pipeline.warehouse import handle, sqlfiles
from pipeline.warehouse.spark.storage import SparkTables

Clear = dict[str, set[tuple[str, ...]]]


def commit(con: Any, batch: str, kind: str, clear: Clear, now: datetime) -> None:
    """Inside the caller's DuckDB transaction: the batch is committed when that transaction is."""
    sqlfiles.run(con, "spark/commit_batch", {
        "batch_id": batch, "kind": kind, "committed_at": now,
        "clear": json.dumps({t: sorted(list(p) for p in parts) for t, parts in clear.items()})})


def publish(wh: handle.Warehouse, warehouse: SparkTables, batch: str, clear: Clear, now: datetime) -> int:
    moved = warehouse.publish(batch, clear)
    with wh.writing() as con:
        sqlfiles.run(con, "spark/mark_published", {"batch_id": batch, "published_at": now})
    return moved


def recover(wh: handle.Warehouse, warehouse: SparkTables, now: datetime) -> tuple[int, int]:
    """Publish the batches DuckDB committed but a crash left unpublished; delete staging of the others.
    Returns (rolled forward, discarded)."""
    with wh.writing() as con:
        pending = {b: json.loads(c) for b, c in sqlfiles.run(con, "spark/unpublished_batches").fetchall()}
    forward = 0
    for batch, clear in pending.items():
        publish(wh, warehouse, batch, {t: {tuple(p) for p in parts} for t, parts in clear.items()}, now)
        forward += 1
    dropped = 0
    for batch in warehouse.staged_batches():
        if batch not in pending:
            warehouse.discard(batch)
            dropped += 1
    return forward, dropped
