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

An intra-day look (`batch`) does not recompute the day so far: the new files' rows
are rolled up alone and added to the gate's rollups (rollup_hist, rollup_device_day:
counts and sums add up), so a look costs its batch, not the day. The days added to are
provisional (rollup_provisional_days): their rollup_daily (exact quantiles, which do
not add up) waits, and the next whole refresh recomputes them from their events, so
whole-day verdicts are what they would have been without looks.
"""

from __future__ import annotations

import hashlib
import json
import re
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
GATE_ROLLUPS = ("rollup_hist", "rollup_device_day")  # the ones the gate reads


@dataclass
class RefreshResult:
    full: bool
    days: list[tuple[str, date]] = field(default_factory=list)  # (release, day) recomputed
    groups: int = 0
    seconds: float = 0.0
    added: list[tuple[str, date]] = field(default_factory=list)  # (release, day) an intra-day batch was added to
    batch_rows: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"full_rebuild": self.full, "days_recomputed": [{"release": r, "day": d.isoformat()}
                                                               for r, d in self.days],
                "groups_written": self.groups, "seconds": round(self.seconds, 3),
                "days_added_to": [{"release": r, "day": d.isoformat()} for r, d in self.added],
                "batch_rows": self.batch_rows}

    def __str__(self) -> str:
        if not self.days and not self.added:
            return "rollup up to date: no new rows"
        parts = []
        if self.days:
            parts.append(f"{'rebuilt' if self.full else 'refreshed'}: {self.groups} groups for {_spans(self.days)}")
        if self.added:
            parts.append(f"{self.batch_rows} new rows added to {_spans(self.added)} (intra-day: the daily "
                         "rollup of those days waits for the next whole refresh)")
        return f"rollup {'; '.join(parts)} in {self.seconds:.2f} s"


def _spans(days: list[tuple[str, date]]) -> str:
    per_release: dict[str, list[date]] = {}
    for r, d in days:
        per_release.setdefault(r, []).append(d)
    return ", ".join(f"{r} ({min(ds)})" if len(ds) == 1 else f"{r} ({len(ds)} days, {min(ds)}..{max(ds)})"
                     for r, ds in sorted(per_release.items()))


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
            now: datetime | None = None, batch: bool = False) -> RefreshResult:
    """`batch`: an intra-day look's refresh (the module's docstring)."""
    now = clock.now(now)
    start = time.perf_counter()
    with handle.of(warehouse, "aggregate") as wh, wh.writing() as con:
        done = refresh_on(con, config, full, now, batch)
    done.seconds = time.perf_counter() - start
    return done


def refresh_on(con: duckdb.DuckDBPyConnection, config: Config, full: bool, now: datetime,
               batch: bool = False) -> RefreshResult:
    """The refresh on an open writing connection, in one transaction (its seconds are the caller's to time)."""
    digest = settings_digest(config)
    state = sqlfiles.run(con, "rollups/state").fetchone()
    full = full or state is None or state[1] != digest
    after = -1 if full else state[0]
    whole = full or not batch
    con.begin()
    try:
        save_settings(con, config, digest, now)
        if full:
            sqlfiles.run(con, "rollups/clear_live_days")
        sqlfiles.run(con, "rollups/touched_days", {"after_file_id": after, "whole": whole})
        sqlfiles.run(con, "rollups/batch_days", {"after_file_id": after, "whole": whole})
        day_rows = sqlfiles.run(con, "rollups/day_rows").fetchall()
        groups = 0
        if day_rows:
            for table in ("days", "hist_days", "device_days"):
                sqlfiles.run(con, f"rollups/delete_{table}")
        for first, last in day_chunks([rows for _, _, rows in day_rows], CHUNK_ROWS):
            sqlfiles.run(con, "rollups/chunk_days", {"first": first, "last": last})
            sqlfiles.view(con, "rollups/chunk_rows", "chunk_rows")
            groups += insert_chunk(con, config, now)
        added = [(r, d) for r, d in con.execute("SELECT release, day FROM batch_days ORDER BY ALL").fetchall()]
        batch_rows = add_batch(con, config, after) if added else 0
        sqlfiles.run(con, "rollups/set_day_versions")
        sqlfiles.run(con, "rollups/settle_provisional")
        save_state(con, digest, now)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return RefreshResult(full, [(r, d) for r, d, _ in day_rows], groups, 0.0, added, batch_rows)


def add_batch(con: duckdb.DuckDBPyConnection, config: Config, after: int) -> int:
    """Roll up the rows of files newer than `after` on the days of batch_days alone, into temporary tables that
    shadow the gate's rollups, and add them to the stored ones; the days become provisional. The rows rolled up."""
    rows = sqlfiles.run(con, "rollups/batch_rows", {"after_file_id": after}).fetchall()[0][0]
    con.execute("CREATE OR REPLACE TEMP VIEW chunk_rows AS SELECT * FROM batch_rows")
    for table in GATE_ROLLUPS:
        con.execute(temp_rollup_ddl(table))
    insert_gate_rollups(con, config)
    for table in GATE_ROLLUPS:
        con.execute(f"ALTER TABLE temp.{table} RENAME TO batch_{table.removeprefix('rollup_')}")
    sqlfiles.run(con, "rollups/add_batch_hist")
    sqlfiles.run(con, "rollups/add_batch_device_days")
    sqlfiles.run(con, "rollups/mark_provisional")
    con.execute("DROP VIEW temp.chunk_rows")
    for table in ("batch_hist", "batch_device_day", "batch_rows"):
        con.execute(f"DROP TABLE temp.{table}")
    return rows


def temp_rollup_ddl(table: str) -> str:
    """sql/ddl/derived.sql's CREATE TABLE of `table` as a temporary table of the same name, which shadows the
    stored one on this connection until dropped (also on a read-only connection to a warehouse no writer has
    opened since an upgrade, which may not have the stored one)."""
    text = re.sub(r"--[^\n]*", "", sqlfiles.sql_file("ddl/derived").text)
    head = f"CREATE TABLE IF NOT EXISTS {table} ("
    statement = next(s.strip() for s in text.split(";") if s.strip().startswith(head))
    return statement.replace("CREATE TABLE IF NOT EXISTS", "CREATE OR REPLACE TEMP TABLE", 1)


def insert_chunk(con: duckdb.DuckDBPyConnection, config: Config, now: datetime) -> int:
    """Recompute every rollup of the rows of the view chunk_rows; the number of rollup_daily groups."""
    groups = sqlfiles.run(con, "rollups/insert_days", {"updated_at": now}).fetchone()[0]
    insert_gate_rollups(con, config)
    return groups


def insert_gate_rollups(con: duckdb.DuckDBPyConnection, config: Config) -> None:
    """The rollups the gate reads (rollup_hist, rollup_device_day) of the rows of the view chunk_rows."""
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
