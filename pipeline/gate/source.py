"""What the gate reads: the rollups (rollup_device_day, rollup_hist) when they are current for the config in
use; else, on DuckDB, the same statistics rolled up from the window's events for this evaluation.

The rollups are current when every loaded file is folded in, no replaced row left a day to recompute, and they
were built with this config's settings (network buckets, daily cap, p95 budgets, histogram error: the digest).
Otherwise the window's days are rolled up from raw events, by the same SQL (sql/rollups/insert_*.sql), into
temporary tables that shadow the stored ones until the evaluation ends: the gate is as right as from the
rollups, costs a scan of the window's events, and says so (`source` in its output). Spark refuses instead,
saying what to run: its rollups are refreshed by its writer (`pipeline aggregate --engine spark`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.common.config import DEFAULT_CONFIG, Config
from pipeline.common.errors import UsageError
from pipeline.gate.window import Window
from pipeline.warehouse import sqlfiles
from pipeline.warehouse.engine import engine_name

ROLLUP, EVENTS = "rollup", "events"


@dataclass(frozen=True)
class Source:
    kind: str  # ROLLUP | EVENTS
    reason: str | None = None  # why not the rollup

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason}


@contextmanager
def _bookkeeping(engine: Any) -> Iterator[Any]:
    """The DuckDB connection that holds the rollup's state: the engine's own, or Spark's bookkeeping file."""
    if engine_name(engine) == "spark":
        from pipeline.warehouse import db

        with db.reading(engine.db_path) as con:
            yield con
    else:
        yield getattr(engine, "con", engine)


def stale_reason(engine: Any, config: Config) -> str | None:
    """Why the stored rollups cannot answer for `config` (None when they can)."""
    from pipeline.warehouse.aggregate import settings_digest

    with _bookkeeping(engine) as con:
        last, digest, newest, stale = sqlfiles.run(con, "rollups/freshness").fetchall()[0]
    if last is None:
        return "no rollup yet"
    if digest != settings_digest(config):
        return (f"the rollup was built with other settings (network buckets, daily cap, p95 budgets or "
                f"sketch error) than {config.source or 'this config'}")
    if newest > last or stale:
        return f"the rollup is behind the events (files up to id {last} folded in, {newest} loaded)"
    return None


@contextmanager
def reading(engine: Any, config: Config, window: Window, release: str, from_events: bool = False) -> Iterator[Source]:
    """The source of this evaluation; with EVENTS, temporary rollups of the window shadow the stored ones.
    from_events: roll the window's events up even when the rollup is current (an audit of the rollup)."""
    reason = "asked for (--from-events)" if from_events else stale_reason(engine, config)
    if reason is None:
        yield Source(ROLLUP)
        return
    custom = config.source and Path(config.source).resolve() != DEFAULT_CONFIG.resolve()
    fix = f"pipeline aggregate --engine {engine_name(engine)}" + (f" --config {config.source}" if custom else "")
    if engine_name(engine) != "duckdb":
        if from_events:
            raise UsageError("--from-events is for DuckDB: a Spark gate reads the rollups")
        raise UsageError(f"the gate reads the rollups and {reason}; run: {fix}")
    from pipeline.warehouse.aggregate import GATE_ROLLUPS, insert_gate_rollups, temp_rollup_ddl

    con = getattr(engine, "con", engine)
    try:
        for table in GATE_ROLLUPS:
            con.execute(temp_rollup_ddl(table))
        sqlfiles.run(con, "rollups/window_days", window.params(release))
        sqlfiles.view(con, "rollups/chunk_rows", "chunk_rows")
        insert_gate_rollups(con, config)
        yield Source(EVENTS, f"{reason}: rolled up from the window's events for this evaluation; "
                             f"`{fix}` lets the gate read the rollup")
    finally:
        for table in (*GATE_ROLLUPS, "chunk_days"):
            con.execute(f"DROP TABLE IF EXISTS temp.{table}")
        con.execute("DROP VIEW IF EXISTS temp.chunk_rows")

