"""The release gate: per segment (task x device_tier x network_bucket), keep the
edge route or roll back to the cloud. SQL computes the figures (sql/gate/*.sql: per-device
sums from the device-day rollup, histograms of the daily rollup; pipeline/gate/source.py) over
whole UTC days (pipeline/gate/window.py); this module tests them against gates/admission.yaml.

Two steps, in this order (docs/how-the-gate-decides.md):

1. measure: every gate of pipeline/common/registry.py gets a GateCheck holding its
   figures and its evidence: hypothesis tests (`tests`: name -> Test, each with
   a p-value of "the threshold holds" (burden prove_harm) or of "it is broken"
   (prove_safe)), and what could not be judged (`short_of_data`,
   `inapplicable`). The unit of independence is the device: every rate carries
   its device-level variance (stats.DeviceRatio). No check has a status yet.
2. decide (pipeline/gate/decide.py): one pass over all the checks of the evaluation. The error
   budget alpha = 1 - confidence is split equally over the enforced gates that
   can cause a rollback on evidence of harm, then over each gate's tests;
   inside each (gate, test) family Holm runs across the checks tested. A
   prove_harm check fails when its test rejects; a prove_safe check fails when
   its test could have proved safety and did not. A check is insufficient_data
   when part of it could not be judged and nothing failed, not_applicable when
   there was nothing to judge, and passes only with evidence. A check that was
   never decided (status None) never passes and never lets a segment keep the edge.

With statistics.method "sequential" (the default) every p-value is always-valid,
so the error rates hold over every nightly look of a rollout, not one.
Segment.decision and GateResult.verdict are derived from the statuses.

Measuring is one pass over the SQL's rows in which every gate reads the same figures: `_Measure` is the gate
families of budgets.py, quality.py, rates.py and retention.py over what measure.py gives them all.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import duckdb

from pipeline.common import clock
from pipeline.common.config import Config
from pipeline.common.errors import UnknownRelease
from pipeline.common.registry import GATE_NAMES, GATES, GateName
from pipeline.common.vocabulary import Side, Status, Verdict
from pipeline.gate import assignment, cells, quantiles, source
from pipeline.gate.budgets import Budgets
from pipeline.gate.decide import settle
from pipeline.gate.figures import (
    counts,
    day_counts,
)
from pipeline.gate.measure import RETENTION_SQL, WEAK_SQL, Figures, level_key
from pipeline.gate.quality import Quality
from pipeline.gate.rates import Rates
from pipeline.gate.result import GateCheck, GateResult, Segment
from pipeline.gate.retention import Retention
from pipeline.gate.window import Window, gate_window
from pipeline.warehouse import sqlfiles

ERROR_DAYS_SQL = "gate/error_days"
KEPT_DAYS_SQL = "gate/kept_device_days"


class _Measure(Budgets, Quality, Rates, Retention):
    """Step 1: one method per gate of the registry, each returning an undecided GateCheck; each family of gates in
    its own module (measure.py)."""

    def segment(self, row: dict[str, Any]) -> Segment:
        gates = self.config.gates_for(row["task"])
        checks = {spec.name: getattr(self, spec.name)(row, gates) for spec in GATES}
        return Segment(row["task"], row["device_tier"], row["network_bucket"], row["rows"], checks,
                       self.config.min_rows_per_segment)


_unmeasured = [g for g in GATE_NAMES if not callable(getattr(_Measure, g, None))]
assert not _unmeasured, f"gates of the registry without a measurement in gate/evaluate.py: {_unmeasured}"


def returning_devices(con: Any, params: dict[str, Any], config: Config) -> dict[tuple, dict[str, Any]] | None:
    """sql/gate/retention.sql's rows by (side, (task, tier) or () release-wide); None when requests, not devices,
    are assigned to the arms (no device is on one arm only)."""
    if config.assignment.unit != "device":
        return None
    horizon = timedelta(days=config.gates.retention.horizon_days)
    rows = sqlfiles.dicts(con, RETENTION_SQL, {**params, "cohort_end": params["window_end"] - horizon,
                                               "horizon_seconds": horizon.total_seconds()})
    return {(r["side"], (r["task"], r["device_tier"]) if r["level"] == 0 else ()): r for r in rows}


def judge_sums(config: Config, device_days: dict[tuple, dict[str, Any]] | None = None,
               returning: dict[tuple, dict[str, Any]] | None = None) -> list[GateCheck]:
    """kill_rate and retention measured and decided as the gate does, from the per-device sums their SQL returns
    (sql/gate/device_days.sql by level key, sql/gate/retention.sql by (side, key)) without a warehouse:
    bench/guardrails.py simulates those sums. Every segment key of device_days gets its kill check; every
    task x tier of returning its retention check; each gate's release-wide check leads its family."""
    measure = _Measure(None, device_days or {}, {}, returning, config)  # type: ignore[arg-type]
    checks: list[GateCheck] = []
    if device_days:
        checks += [measure.kill_rate({"task": k[0], "device_tier": k[1], "network_bucket": k[2]}, config.gates)
                   for k in device_days if len(k) == 3 and k[0] != "*"]
        checks += [c for c in [measure.release_kills()] if c is not None]
    if returning is not None:
        checks += [measure.retention({"task": k[0], "device_tier": k[1]}, config.gates)
                   for k in dict.fromkeys(key for _, key in returning if key)]
        checks.append(measure.release_retention())
    settle(checks, config)
    return checks


def _days_observed(con: Any, params: dict[str, Any]) -> float:
    """Days from the release's first row in the window to the window's end."""
    first = sqlfiles.run(con, "gate/first_seen", params).fetchone()[0]
    if first is None:
        return 0.0
    return max(0.0, (params["window_end"] - first) / timedelta(days=1))


def releases(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The releases with raw events or with roll-ups only: archived (pipeline/warehouse/archive.py), or in a
    snapshot, which holds no raw events."""
    found = {r[0] for r in sqlfiles.run(con, "gate/releases").fetchall()}
    found |= {r[0] for r in sqlfiles.run(con, "gate/rolled_releases").fetchall()}
    return sorted(found)


def require_release(con: duckdb.DuckDBPyConnection, release: str) -> None:
    """UnknownRelease, naming the releases present, unless `release` has rows; every command asks this."""
    if sqlfiles.run(con, "gate/has_release", {"release": release}).fetchall()[0][0] or release in releases(con):
        return
    known = releases(con)
    if release not in known:
        if not known:
            raise UnknownRelease("no telemetry in this database yet; ingest some first (pipeline ingest PATH)")
        raise UnknownRelease(f"no release {release!r} in the database; releases present: {', '.join(known)}. "
                             "Did you ingest its files? (pipeline ingest PATH)")


def evaluate_gate(con: duckdb.DuckDBPyConnection, release: str, config: Config,
                  as_of: datetime | None = None, now: datetime | None = None,
                  holdback_share: float | None = None, from_events: bool = False, intraday: bool = False) -> GateResult:
    """The release's gate result over the whole days before as_of (pipeline/gate/window.py; `intraday`: and
    as_of's day so far, an intra-day look). holdback_share:
    the hold-back share this release declares, over the config's assignment.holdback_share
    (`pipeline gate --holdback-share`); from_events: read the window's events, not the rollups (source.py)."""
    declared_by = "config"
    if holdback_share is not None:
        config = dataclasses.replace(config, assignment=dataclasses.replace(config.assignment,
                                                                            holdback_share=holdback_share))
        declared_by = "--holdback-share"
    now = clock.now(now or as_of)
    as_of = as_of or now
    require_release(con, release)
    window = gate_window(as_of, config, intraday)
    kill_codes = list(config.gates.kill_rate.kill_codes)
    with source.reading(con, config, window, release, from_events) as read_from:
        result, measure = _evaluate(con, release, config, as_of, now, window, declared_by)
        result.source = read_from
        _judge_kept(con, result, measure, kill_codes)
        if config.routing.dimensions:
            result.cells, result.cell_dimensions = cells.judge(con, result, config), config.routing.dimensions
    return result


def _evaluate(con: Any, release: str, config: Config, as_of: datetime, now: datetime, window: Window,
              declared_by: str) -> tuple[GateResult, _Measure]:
    params = window.params(release)
    error = config.engine.sketch_relative_error
    figures = Figures(counts(con, params, config),
                       quantiles.segment_quantiles(con, params, config), sqlfiles.dicts(con, WEAK_SQL, params), error)
    device_days = {level_key(r): r for r in day_counts(con, params, config)}
    error_days: dict[tuple, dict[str, int]] = {}
    for r in sqlfiles.dicts(con, ERROR_DAYS_SQL, params):
        error_days.setdefault(level_key(r), {})[r["error_code"]] = int(r["device_days"])
    measure = _Measure(figures, device_days, error_days, returning_devices(con, params, config), config)
    segments = [measure.segment(row) for row in figures.segments()]
    release_wide: dict[str, GateCheck] = {}
    if segments:
        release_wide[GateName.QUALITY_LOSS] = measure.release_quality()
        kills = measure.release_kills()
        if kills is not None:
            release_wide[GateName.KILL_RATE] = kills
        release_wide[GateName.RETENTION] = measure.release_retention()
    gatekeepers = measure.gatekeepers() if segments else {}
    result = GateResult(release, now, as_of, window, config.source, config.digest, segments, release_wide,
                        gatekeepers=gatekeepers, cloud_only=not segments and figures.get(Side.CLOUD, ()) is not None,
                        quantiles={"estimator": quantiles.SKETCH, "relative_error": error,
                                   "engine": quantiles.engine_name(con)},
                        held_back_hours=config.completeness_lag_hours,
                        arrival_lag=quantiles.arrival_lag(con, params, config))
    settle(result.checks(), config, _days_observed(con, params))
    if segments:
        result.assignment = assignment.check(con, params, config, declared_by)
        assignment.apply([(s.task, s.device_tier, c) for s in segments for c in s.checks.values()]
                         + [(None, None, c) for c in release_wide.values()], result.assignment)
    return result, measure


def _judge_kept(con: Any, result: GateResult, measure: _Measure, kill_codes: list[str]) -> None:
    """The release-wide kill check, re-judged on the edge traffic the release keeps when some segments roll back."""
    kills = result.release_wide.get(GateName.KILL_RATE)
    rolled = [s.key for s in result.segments if s.decision == Verdict.ROLLBACK_TO_CLOUD]
    if kills is not None and kills.status == Status.FAIL and rolled and len(rolled) < len(result.segments):
        params = {**result.window.params(result.release), "kill_codes": kill_codes, "excluded": rolled}
        kept = sqlfiles.dicts(con, KEPT_DAYS_SQL, params)
        measure.judge_kept(kills, kept[0] if kept else {}, rolled)
