"""The release gate: per segment (task x device_tier x network_bucket), keep the
edge route or roll back to the cloud. SQL computes the figures
(sql/gate/segment_counts.sql, segment_quantiles.sql); this module compares them with gates/admission.yaml.

Two steps, in this order (README "How the gate decides"):

1. measure: every gate of pipeline/registry.py gets a GateCheck holding its
   figures and its evidence: a point rule (`over_threshold`, e.g. the p95 over
   its budget), one-sided tests (`tests`: family -> p-value of "within the
   threshold"), and what could not be judged (`short_of_data`, `inapplicable`).
   No check has a status yet.
2. decide (`decide`): one pass over all the checks of the evaluation. Each test
   family is Holm-corrected across every check that tested it, so a release with
   many segments is not rolled back by noise; then a check fails on a point rule
   or a rejected test, is insufficient_data when part of it could not be judged
   and nothing failed, is not_applicable when there was nothing to judge, and
   passes only with evidence. A check that was never decided (status None) never
   passes and never lets a segment keep the edge.

Segment.decision and GateResult.verdict are derived from the statuses.
Quality is pooled over network buckets within task x tier (and tested
release-wide too): answer quality does not depend on the bucket, and pooling
triples the rows behind the test. The fallback ceiling is judged on its own when
there is no cloud baseline (only the excess over the cloud needs one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from pipeline import clock, quantiles, sketch, sqlfiles, stats
from pipeline.config import Config
from pipeline.errors import UnknownRelease
from pipeline.output_schema import SCHEMA_VERSION
from pipeline.registry import BY_NAME, GATE_NAMES, GATES

COUNTS_SQL = "gate/segment_counts"
QUANTILES_SQL = "gate/segment_quantiles"
DEVICE_DAYS_SQL = "gate/device_days"
_QUANTILE_FIGURES = tuple(g.figure for g in GATES if g.kind == "p95_budget")
GATE_ORDER = list(GATE_NAMES)
LEVEL_NAMES = {0: "segment", 1: "task x tier (all buckets)", 2: "task x bucket (all tiers)", 3: "task",
               7: "release"}
STATUSES = ("pass", "fail", "insufficient_data", "not_applicable")
# why a check failed when only this test family rejected
_TEST_NOTES = {"throttled_share": "throttled share above its ceiling"}


@dataclass
class GateCheck:
    gate: str
    mode: str
    status: str | None = None  # None until decide(): then one of STATUSES
    measured: float | None = None
    threshold: float | None = None
    baseline: float | None = None
    baseline_level: str | None = None
    rows: int = 0
    interval: tuple[float, float] | None = None
    p_value: float | None = None
    borderline: bool = False
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    sql: str = f"sql/{COUNTS_SQL}.sql"
    # evidence, filled by measurement and weighed by decide()
    over_threshold: bool | None = None
    tests: dict[str, float] = field(default_factory=dict)
    short_of_data: bool = False
    inapplicable: bool = False

    @property
    def blocks(self) -> bool:
        return self.mode == "enforce" and self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("status", "mode", "measured", "threshold", "baseline", "baseline_level",
                                           "rows", "p_value", "borderline", "note", "sql")}
        d["status"] = self.status or "undecided"
        d["interval_95"] = list(self.interval) if self.interval else None
        d.update(self.extra)
        return {k: _json_number(v) for k, v in d.items()}


def _json_number(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6) if math.isfinite(v) else None
    if isinstance(v, list):
        return [_json_number(x) for x in v]
    return v


@dataclass
class Segment:
    task: str
    device_tier: str
    network_bucket: str
    rows: int
    checks: dict[str, GateCheck]
    min_rows: int = 1  # config.min_rows_per_segment: fewer edge rows are not judged

    @property
    def key(self) -> str:
        return f"{self.task}/{self.device_tier}/{self.network_bucket}"

    @property
    def needs_rows(self) -> int | None:
        return self.min_rows - self.rows if self.rows < self.min_rows else None

    @property
    def decision(self) -> str:
        enforced = [c for c in self.checks.values() if c.mode == "enforce"]
        if self.needs_rows is not None or any(c.status is None for c in enforced):
            return "insufficient_data"
        if any(c.status == "fail" for c in enforced):
            return "rollback_to_cloud"
        if any(c.status == "insufficient_data" for c in enforced):
            return "insufficient_data"
        return "keep_edge"

    @property
    def failed_gates(self) -> list[str]:
        return [g for g, c in self.checks.items() if c.blocks]

    def to_dict(self) -> dict[str, Any]:
        d = {"task": self.task, "device_tier": self.device_tier, "network_bucket": self.network_bucket,
             "rows": self.rows, "decision": self.decision, "failed_gates": self.failed_gates,
             "observed_failures": [g for g, c in self.checks.items() if c.mode == "observe" and c.status == "fail"],
             "metrics": {g: c.to_dict() for g, c in self.checks.items()}}
        if self.needs_rows is not None:
            d["needs_rows"] = self.needs_rows
        return d


@dataclass
class GateResult:
    release: str
    evaluated_at: datetime
    as_of: datetime
    window_start: datetime
    config_source: str
    config_digest: str
    segments: list[Segment]
    release_wide: dict[str, GateCheck]
    cloud_only: bool = False  # the window holds cloud rows of the release but no edge rows
    # where the window's p95s came from (pipeline/quantiles.py): estimator, its relative error, the engine
    quantiles: dict[str, Any] = field(default_factory=lambda: {"estimator": "exact", "relative_error": None,
                                                               "engine": "duckdb"})

    @property
    def judged(self) -> list[Segment]:
        return [s for s in self.segments if s.decision != "insufficient_data"]

    @property
    def verdict(self) -> str:
        return self._verdict()[0]

    @property
    def note(self) -> str:
        return self._verdict()[1]

    def _verdict(self) -> tuple[str, str]:
        if not self.segments:
            if self.cloud_only:
                return "insufficient_data", "the release has only cloud rows in the window: no edge route to judge"
            return "insufficient_data", "the release has no rows in the evaluation window"
        judged = self.judged
        if not judged:
            return "insufficient_data", "no segment has enough rows to judge"
        if any(c.blocks for c in self.release_wide.values()):
            return "rollback_to_cloud", "a release-wide gate failed"
        rolled = [s for s in judged if s.decision == "rollback_to_cloud"]
        if len(rolled) == len(judged):
            return "rollback_to_cloud", "every judged segment rolls back"
        if rolled:
            return "partial_rollback", f"{len(rolled)} of {len(judged)} judged segments roll back"
        return "keep_edge", f"all {len(judged)} judged segments keep the edge route"

    @property
    def exit_code(self) -> int:
        return {"keep_edge": 0, "partial_rollback": 1, "rollback_to_cloud": 1, "insufficient_data": 3}[self.verdict]

    def checks(self) -> list[GateCheck]:
        """Every check of the evaluation once (pooled quality checks are shared by their segments)."""
        seen: dict[int, GateCheck] = {}
        for c in [c for s in self.segments for c in s.checks.values()] + list(self.release_wide.values()):
            seen.setdefault(id(c), c)
        return list(seen.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "release": self.release,
            "verdict": self.verdict,
            "evaluated_at": self.evaluated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "as_of": self.as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "window": {"start": self.window_start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "end": self.as_of.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "config": {"path": self.config_source, "digest": self.config_digest},
            "quantiles": dict(self.quantiles),
            "release_wide": {g: c.to_dict() for g, c in self.release_wide.items()},
            "note": self.note,
            "segments": [s.to_dict() for s in self.segments],
        }

    def __str__(self) -> str:
        from pipeline.render import gate_table

        return gate_table(self)


def _level_key(row: dict[str, Any]) -> tuple:
    level = row["level"]
    return {0: (row["task"], row["device_tier"], row["network_bucket"]), 1: (row["task"], row["device_tier"]),
            2: (row["task"], "*", row["network_bucket"]), 3: (row["task"],), 7: ()}[level]


class _Figures:
    """The SQL's rows, found by side and level; quantile figures merged in where computed."""

    def __init__(self, counts: list[dict[str, Any]], quantiles: list[dict[str, Any]],
                 relative_error: float | None = None, quantiles_sql: str = QUANTILES_SQL):
        self.relative_error = relative_error  # the sketch's, folded into every quantile interval; None: exact
        self.quantiles_sql = quantiles_sql
        self.by = {(r["side"], _level_key(r)): r for r in counts}
        for q in quantiles:
            row = self.by[(q["side"], _level_key(q))]
            for name in _QUANTILE_FIGURES:
                values = q[f"{name}_q"]
                row[f"{name}_p95"], row[f"{name}_grid"] = (values[0], values[1:]) if values else (None, None)

    def get(self, side: str, key: tuple) -> dict[str, Any] | None:
        return self.by.get((side, key))

    def segments(self) -> list[dict[str, Any]]:
        return sorted((r for (side, key), r in self.by.items() if side == "edge" and len(key) == 3 and key[1] != "*"),
                      key=lambda r: (r["task"], r["device_tier"], r["network_bucket"]))

    def cloud_baseline(self, task: str, tier: str, bucket: str | None, minimum: int) -> tuple[dict | None, str | None]:
        """The contract's widening: own segment, then same task and tier, then same task."""
        keys = ([(0, (task, tier, bucket))] if bucket else []) + [(1, (task, tier)), (3, (task,))]
        for level, key in keys:
            row = self.get("cloud", key)
            if row and row["rows"] >= minimum:
                return row, LEVEL_NAMES[level]
        return None, None


def _finite(*values: Any) -> bool:
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


class _Measure:
    """Step 1: one method per gate of the registry, each returning an undecided GateCheck."""

    def __init__(self, figures: _Figures, device_days: dict[tuple, tuple[int, int]], config: Config):
        self.f = figures
        self.device_days = device_days
        self.config = config
        self.pools: dict[tuple, GateCheck] = {}  # quality, per task x tier

    def segment(self, row: dict[str, Any]) -> Segment:
        gates = self.config.gates_for(row["task"])
        checks = {spec.name: getattr(self, spec.name)(row, gates) for spec in GATES}
        return Segment(row["task"], row["device_tier"], row["network_bucket"], row["rows"], checks,
                       self.config.min_rows_per_segment)

    def _new(self, name: str, gates: Any) -> GateCheck:
        settings = getattr(gates, name)
        key = BY_NAME[name].threshold_key
        return GateCheck(name, settings.mode, threshold=getattr(settings, key) if key else None)

    def _budget(self, name: str, row: dict, gates: Any, min_rows: int | None = None) -> GateCheck:
        """A p95 budget: the point estimate decides; the interval is reported."""
        check = self._new(name, gates)
        prefix = BY_NAME[name].figure
        n, p95 = row[f"{prefix}_n"], row[f"{prefix}_p95"]
        check.rows, check.sql = n, f"sql/{self.f.quantiles_sql}.sql"
        needed = self.config.min_measured_rows if min_rows is None else min_rows
        if n < needed or not _finite(p95):
            check.short_of_data, check.note = True, f"{n} rows have a value; {needed} needed"
            return check
        check.measured = p95
        check.interval = self._interval(row[f"{prefix}_grid"], n)
        check.over_threshold = p95 > check.threshold
        if check.interval:
            check.borderline = check.interval[0] <= check.threshold < check.interval[1]
        return check

    def _interval(self, grid: Any, n: int) -> tuple[float, float] | None:
        """The p95's interval from order statistics, widened by the sketch's error when a sketch gave the grid."""
        interval = stats.quantile_interval(grid, n, 0.95, self.config.statistics.confidence)
        return sketch.widen(interval, self.f.relative_error) if self.f.relative_error else interval

    def peak_memory(self, row: dict, gates: Any) -> GateCheck:
        return self._budget("peak_memory", row, gates)

    def resident_memory(self, row: dict, gates: Any) -> GateCheck:
        return self._budget("resident_memory", row, gates)

    def inference_duration(self, row: dict, gates: Any) -> GateCheck:
        return self._budget("inference_duration", row, gates)

    def cold_start(self, row: dict, gates: Any) -> GateCheck:
        if row["cold_n"] == 0:
            check = self._new("cold_start", gates)
            check.inapplicable, check.note = True, "no cold starts"
            return check
        # cold starts are rare by design (a warm model has none): every measured one counts
        return self._budget("cold_start", row, gates, min_rows=1)

    def quality_loss(self, row: dict, gates: Any) -> GateCheck:
        key = (row["task"], row["device_tier"])
        if key not in self.pools:
            c = self.config
            base, level = self.f.cloud_baseline(*key, None, c.min_cloud_rows_for_baseline)
            self.pools[key] = self._quality(self.f.get("edge", key), base, level, gates)
            self.pools[key].note = (self.pools[key].note + "; " if self.pools[key].note else "") + \
                "pooled over network buckets"
        return self.pools[key]

    def release_quality(self) -> GateCheck:
        c = self.config
        edge_all, cloud_all = self.f.get("edge", ()), self.f.get("cloud", ())
        enough = cloud_all and cloud_all["rows"] >= c.min_cloud_rows_for_baseline
        return self._quality(edge_all, cloud_all if enough else None, "release", c.gates)

    def _quality(self, edge: dict | None, base: dict | None, level: str | None, gates: Any) -> GateCheck:
        conf = self.config.statistics.confidence
        check = self._new("quality_loss", gates)
        if not edge or not base or base["adopted"] == 0:
            check.short_of_data, check.note = True, "no cloud baseline with enough rows"
            return check
        e_rate, c_rate = edge["adopted"] / edge["rows"], base["adopted"] / base["rows"]
        check.measured, check.baseline, check.baseline_level = (c_rate - e_rate) / c_rate, c_rate, level
        check.rows = edge["rows"]
        # power note: rows per side to see a loss of the tolerance itself (80 % power, one-sided)
        check.extra.update(edge_adoption=e_rate, cloud_rows=base["rows"],
                           rows_to_detect_tolerance=stats.rows_for_rate_difference(
                               c_rate, c_rate * check.threshold, conf))
        check.interval = stats.relative_loss_interval(edge["adopted"], edge["rows"], base["adopted"], base["rows"],
                                                      conf)
        check.tests["quality"] = stats.p_relative_loss_above(
            edge["adopted"], edge["rows"], base["adopted"], base["rows"], check.threshold)
        return check

    def failure_detectability(self, row: dict, gates: Any) -> GateCheck:
        check = self._new("failure_detectability", gates)
        check.rows = row["failures"]
        if row["failures"] == 0:
            check.inapplicable, check.note = True, "no failures"
            return check
        check.measured = row["detected"] / row["failures"]
        check.interval = stats.wilson(row["detected"], row["failures"], self.config.statistics.confidence)
        check.tests["failure_detectability"] = stats.p_rate_below(row["detected"], row["failures"], check.threshold)
        return check

    def fallback_rate(self, row: dict, gates: Any) -> GateCheck:
        c = self.config
        check = self._new("fallback_rate", gates)
        check.rows = row["rows"]
        check.measured = row["fallbacks"] / row["rows"]
        check.interval = stats.wilson(row["fallbacks"], row["rows"], c.statistics.confidence)
        # the absolute ceiling needs no baseline; only the excess over the cloud does
        check.tests["fallback_ceiling"] = stats.p_rate_above(row["fallbacks"], row["rows"], check.threshold)
        base, level = self.f.cloud_baseline(row["task"], row["device_tier"], row["network_bucket"],
                                            c.min_cloud_rows_for_baseline)
        margin = gates.fallback_rate.max_excess_over_cloud
        check.extra["max_excess_over_cloud"] = margin
        if base is None:
            check.short_of_data, check.note = True, "no cloud baseline with enough rows (ceiling judged alone)"
        else:
            check.baseline, check.baseline_level = base["fallbacks"] / base["rows"], level
            check.tests["fallback_excess"] = stats.p_excess_above(
                row["fallbacks"], row["rows"], base["fallbacks"], base["rows"], margin)
        return check

    def weak_network_latency(self, row: dict, gates: Any) -> GateCheck:
        """Edge must beat cloud where networks are weak: the baseline stays in the weak bucket
        (cloud latency there does not depend on the phone), own segment first, then all tiers."""
        c = self.config
        check = self._new("weak_network_latency", gates)
        if row["network_bucket"] != "weak":
            check.inapplicable, check.note = True, "only judged in weak networks"
            return check
        task, tier = row["task"], row["device_tier"]
        base, level = None, None
        for lvl, key in ((0, (task, tier, "weak")), (2, (task, "*", "weak"))):
            cand = self.f.get("cloud", key)
            if cand and cand["total_n"] >= c.min_cloud_rows_for_baseline:
                base, level = cand, LEVEL_NAMES[lvl]
                break
        check.rows, check.sql = row["total_n"], f"sql/{self.f.quantiles_sql}.sql"
        if base is None or row["total_n"] < c.min_measured_rows:
            check.short_of_data, check.note = True, "too few weak-network rows on one side"
            return check
        check.measured, check.baseline, check.baseline_level = row["total_p95"], base["total_p95"], level
        check.threshold = base["total_p95"]
        check.interval = self._interval(row["total_grid"], row["total_n"])
        cloud_iv = self._interval(base["total_grid"], base["total_n"])
        check.extra["baseline_interval_95"] = list(cloud_iv) if cloud_iv else None
        # fails on evidence: the edge's interval lies wholly above the cloud's
        slower = bool(check.interval and cloud_iv and check.interval[0] > cloud_iv[1])
        check.over_threshold = slower
        check.borderline = not slower and check.measured >= check.baseline
        return check

    def thermal(self, row: dict, gates: Any) -> GateCheck:
        check = self._budget("thermal", row, gates)
        ceiling = gates.thermal.max_throttled_share
        check.extra["max_throttled_share"] = ceiling
        if row["throttled_n"] >= self.config.min_measured_rows:
            check.extra["throttled_share"] = row["throttled"] / row["throttled_n"]
            check.tests["throttled_share"] = stats.p_rate_above(row["throttled"], row["throttled_n"], ceiling)
        elif not check.short_of_data:
            check.short_of_data, check.note = True, f"{row['throttled_n']} rows report throttling"
        return check

    def daily_edge_seconds(self, row: dict, gates: Any) -> GateCheck:
        check = self._new("daily_edge_seconds", gates)
        days, over = self.device_days.get((row["task"], row["device_tier"], row["network_bucket"]), (0, 0))
        check.rows = days
        check.extra["cap_seconds"] = self.config.network.daily_edge_seconds_cap
        if days:
            check.measured = over / days
            check.interval = stats.wilson(over, days, self.config.statistics.confidence)
            check.over_threshold = check.measured > check.threshold
        else:
            check.short_of_data, check.note = True, "no device-days in the window"
        return check


_unmeasured = [g for g in GATE_NAMES if not callable(getattr(_Measure, g, None))]
assert not _unmeasured, f"gates of the registry without a measurement in gate.py: {_unmeasured}"


def rejected_tests(checks: Sequence[GateCheck], alpha: float) -> set[tuple[str, int]]:
    """(family, index of the check) of every test rejected: Holm across the checks of each family.
    The seam for the statistics: this is the only place p-values become decisions."""
    families: dict[str, dict[int, float]] = {}
    for i, check in enumerate(checks):
        for family, p in check.tests.items():
            families.setdefault(family, {})[i] = p
    return {(family, i) for family, ps in families.items() for i in stats.holm(ps, alpha)}


def decide(checks: Sequence[GateCheck], config: Config) -> list[str]:
    """Step 2: the status of every check of one evaluation, in one pass (pure: nothing is changed)."""
    rejected = rejected_tests(checks, 1 - config.statistics.confidence)
    statuses = []
    for i, check in enumerate(checks):
        failed = bool(check.over_threshold) or any((family, i) in rejected for family in check.tests)
        if check.inapplicable:
            statuses.append("not_applicable")
        elif failed:
            statuses.append("fail")
        elif check.short_of_data or (check.over_threshold is None and not check.tests):
            statuses.append("insufficient_data")  # no evidence is never a pass
        else:
            statuses.append("pass")
    return statuses


def _settle(checks: Sequence[GateCheck], config: Config) -> None:
    rejected = rejected_tests(checks, 1 - config.statistics.confidence)
    for i, (check, status) in enumerate(zip(checks, decide(checks, config), strict=True)):
        check.status = status
        if check.tests:
            check.p_value = min(check.tests.values())
        by_test = [f for f in check.tests if (f, i) in rejected]
        if status == "fail" and not check.over_threshold and by_test and by_test[0] in _TEST_NOTES:
            check.note = _TEST_NOTES[by_test[0]]


def _dicts(cur: Any) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def releases(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in sqlfiles.run(con, "gate/releases").fetchall()]


def require_release(con: duckdb.DuckDBPyConnection, release: str) -> None:
    """UnknownRelease, naming the releases present, unless `release` has rows; every command asks this."""
    known = releases(con)
    if release not in known:
        if not known:
            raise UnknownRelease("no telemetry in this database yet; ingest some first (pipeline ingest PATH)")
        raise UnknownRelease(f"no release {release!r} in the database; releases present: {', '.join(known)}. "
                             "Did you ingest its files? (pipeline ingest PATH)")


def evaluate_gate(con: duckdb.DuckDBPyConnection, release: str, config: Config,
                  as_of: datetime | None = None, now: datetime | None = None) -> GateResult:
    now = clock.now(now or as_of)
    estimator = quantiles.estimator(con, config)  # exact, or the rollup's sketch (whole days: as of midnight)
    as_of = quantiles.window_end(as_of or now, estimator)
    require_release(con, release)
    window_start = as_of - timedelta(days=config.window_days)
    params = {"release": release, "window_start": window_start, "window_end": as_of}
    error = config.engine.sketch_relative_error if estimator == quantiles.SKETCH else None
    figures = _Figures(_dicts(sqlfiles.run(con, COUNTS_SQL, params)),
                       quantiles.segment_quantiles(con, params, [0.95, *stats.QUANTILE_GRID], config), error,
                       quantiles.HISTOGRAMS_SQL if error else QUANTILES_SQL)
    device_days = {(t, tier, b): (n, over)
                   for t, tier, b, n, over in sqlfiles.run(con, DEVICE_DAYS_SQL, params).fetchall()}
    measure = _Measure(figures, device_days, config)
    segments = [measure.segment(row) for row in figures.segments()]
    release_wide = {"quality_loss": measure.release_quality()} if segments else {}
    result = GateResult(release, now, as_of, window_start, config.source, config.digest, segments, release_wide,
                        cloud_only=not segments and figures.get("cloud", ()) is not None,
                        quantiles={"estimator": estimator, "relative_error": error,
                                   "engine": quantiles.engine_name(con)})
    _settle(result.checks(), config)
    return result
