"""The rollups, kept per (release, day):

- rollup_daily: release x day x task x route x device_tier x network_bucket, for reading and ad hoc SQL;
- rollup_hist: the same groups' log-bucket histograms of each budgeted figure (and of arrival lag);
- rollup_device_day: per device-day and group, the counts and sums the gate's device-level tests read
  (the gate reads only rollup_device_day and rollup_hist: docs/how-the-gate-decides.md).

Refreshed incrementally: only the (release, day) pairs that rows of files newer
than the last refresh fall on are deleted and recomputed, in one transaction.
The exact quantiles hold every value of their group in memory, so the days are
recomputed in chunks of about CHUNK_ROWS stored rows (a bigger day is a chunk of
its own): the refresh's memory follows the chunk, not the run or the warehouse.
A change of a setting stored figures depend on (network buckets, daily cap, a p95
budget, the histograms' error) rebuilds everything.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb

from pipeline.common import clock
from pipeline.common.config import Config
from pipeline.common.registry import GATES
from pipeline.warehouse import handle, sketch, sqlfiles
from pipeline.warehouse.handle import Warehouse

CHUNK_ROWS = 1_000_000  # stored rows recomputed per pass of rollups/insert_days (whole days)
ROLLUP_TABLES = ("rollup_daily", "rollup_hist", "rollup_device_day")


@dataclass
class RefreshResult:
    full: bool
    days: list[tuple[str, date]] = field(default_factory=list)  # (release, day) recomputed
    groups: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"full_rebuild": self.full, "days_recomputed": [{"release": r, "day": d.isoformat()}
                                                               for r, d in self.days],
                "groups_written": self.groups, "seconds": round(self.seconds, 3)}

    def __str__(self) -> str:
        if not self.days:
            return "rollup up to date: no new rows"
        kind = "rebuilt" if self.full else "refreshed"
        per_release: dict[str, list[date]] = {}
        for r, d in self.days:
            per_release.setdefault(r, []).append(d)
        spans = ", ".join(f"{r} ({len(ds)} days, {min(ds)}..{max(ds)})" for r, ds in sorted(per_release.items()))
        return f"rollup {kind}: {self.groups} groups for {spans} in {self.seconds:.2f} s"


def settings_digest(config: Config) -> str:
    """What every stored rollup figure depends on: a change rebuilds the rollups."""
    n = config.network
    text = json.dumps([n.weak_rtt_ms, list(n.weak_network_types), n.daily_edge_seconds_cap,
                       config.engine.sketch_relative_error, budget_params(config)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def budget_params(config: Config) -> dict[str, Any]:
    """The p95 budgets of every task with its own settings, as the list parameters rollups/insert_device_days.sql
    reads (`<figure>_budget` in the order of `budget_tasks`, `<figure>_default` for the other tasks)."""
    tasks = sorted(config.task_overrides or {})
    params: dict[str, Any] = {"budget_tasks": tasks}
    for spec in GATES:
        if spec.kind == "p95_budget":
            params[f"{spec.figure}_budget"] = [float(getattr(getattr(config.gates_for(t), spec.name),
                                                             spec.threshold_key)) for t in tasks]
            params[f"{spec.figure}_default"] = float(getattr(getattr(config.gates, spec.name), spec.threshold_key))
    return params


def use_settings(con: duckdb.DuckDBPyConnection, config: Config) -> None:
    """Make this connection's derived fields follow `config` (bound values, this session only)."""
    n = config.network
    con.execute("SET VARIABLE weak_rtt_ms = $v", {"v": n.weak_rtt_ms})
    con.execute("SET VARIABLE weak_network_types = CAST($v AS VARCHAR[])", {"v": list(n.weak_network_types)})
    con.execute("SET VARIABLE daily_edge_seconds_cap = $v", {"v": n.daily_edge_seconds_cap})


def network_params(config: Config) -> dict[str, Any]:
    """The thresholds the derived fields read (sql/views/settings_bound.sql, rollups/settings.sql)."""
    n = config.network
    return {"weak_rtt_ms": n.weak_rtt_ms, "weak_network_types": list(n.weak_network_types),
            "daily_edge_seconds_cap": n.daily_edge_seconds_cap}


def save_settings(con: duckdb.DuckDBPyConnection, config: Config, digest: str, now: datetime) -> None:
    """The settings the rollup is built with, stored beside it (both engines: the DuckDB file keeps them)."""
    con.execute("DELETE FROM pipeline_settings")
    sqlfiles.run(con, "rollups/settings", {**network_params(config), "digest": digest, "updated_at": now})


def save_state(con: duckdb.DuckDBPyConnection, digest: str, now: datetime) -> None:
    """The rollup is current: every file loaded so far is folded in, with the settings of `digest`."""
    con.execute("DELETE FROM rollup_stale_days")
    last = sqlfiles.run(con, "ingest/last_file_id").fetchone()[0]
    con.execute("DELETE FROM rollup_state")
    sqlfiles.run(con, "rollups/set_state", {"last_file_id": last, "settings_digest": digest, "refreshed_at": now})


def refresh(warehouse: Warehouse | Path, config: Config, full: bool = False,
            now: datetime | None = None) -> RefreshResult:
    now = clock.now(now)
    start = time.perf_counter()
    with handle.of(warehouse, "aggregate") as wh, wh.writing() as con:
        full, day_rows, groups = refresh_on(con, config, full, now)
    return RefreshResult(full, [(r, d) for r, d, _ in day_rows], groups, time.perf_counter() - start)


def refresh_on(con: duckdb.DuckDBPyConnection, config: Config, full: bool,
               now: datetime) -> tuple[bool, list[tuple[str, date, int]], int]:
    """The refresh on an open writing connection, in one transaction: (full rebuild?, (release, day, stored
    rows) recomputed, rollup_daily groups written)."""
    digest = settings_digest(config)
    state = sqlfiles.run(con, "rollups/state").fetchone()
    full = full or state is None or state[1] != digest
    after = -1 if full else state[0]
    con.begin()
    try:
        save_settings(con, config, digest, now)
        if full:
            sqlfiles.run(con, "rollups/clear_live_days")
        sqlfiles.run(con, "rollups/touched_days", {"after_file_id": after})
        day_rows = sqlfiles.run(con, "rollups/day_rows").fetchall()
        groups = 0
        if day_rows:
            for table in ("days", "hist_days", "device_days"):
                sqlfiles.run(con, f"rollups/delete_{table}")
        for first, last in day_chunks([rows for _, _, rows in day_rows], CHUNK_ROWS):
            sqlfiles.run(con, "rollups/chunk_days", {"first": first, "last": last})
            groups += insert_chunk(con, config, now)
        if day_rows:
            sqlfiles.run(con, "rollups/set_day_versions")
        save_state(con, digest, now)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return full, day_rows, groups


def insert_chunk(con: duckdb.DuckDBPyConnection, config: Config, now: datetime) -> int:
    """Recompute every rollup for the days of the temp table chunk_days; the number of rollup_daily groups."""
    groups = sqlfiles.run(con, "rollups/insert_days", {"updated_at": now}).fetchone()[0]
    insert_gate_rollups(con, config)
    return groups


def insert_gate_rollups(con: duckdb.DuckDBPyConnection, config: Config) -> None:
    """The rollups the gate reads (rollup_hist, rollup_device_day) for the days of the temp table chunk_days."""
    log_gamma = {"log_gamma": sketch.log_gamma(config.engine.sketch_relative_error)}
    sqlfiles.run(con, "rollups/insert_hist_days", log_gamma)
    sqlfiles.run(con, "rollups/insert_lag_days", log_gamma)
    sqlfiles.run(con, "rollups/insert_device_days", budget_params(config))


def day_chunks(rows: list[int], budget: int) -> list[tuple[int, int]]:
    """Runs of consecutive days (positions first..last, from 1) holding at most `budget` rows
    together; a day with more rows than that is a run of its own."""
    chunks: list[tuple[int, int]] = []
    first, total = 1, 0
    for position, n in enumerate(rows, start=1):
        if total and total + n > budget:
            chunks.append((first, position - 1))
            first, total = position, 0
        total += n
    if rows:
        chunks.append((first, len(rows)))
    return chunks
