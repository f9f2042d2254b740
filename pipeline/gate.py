"""The release gate: per segment (task x device_tier x network_bucket), keep the
edge route or roll back to the cloud. SQL computes the figures
(sql/gate/segment_counts.sql, segment_quantiles.sql); this module compares them with gates/admission.yaml.

How a gate decides (README "How the gate decides"):
- p95 budgets (peak/resident memory, inference duration, cold start, thermal
  rise) compare the p95 itself with the budget; a distribution-free 95 %
  interval is reported, and a result whose interval straddles the budget is
  marked borderline.
- rates and comparisons with the cloud (quality loss, failure detectability,
  fallback rate, throttled share, weak-network latency) fail only on evidence:
  a one-sided test at alpha = 1 - confidence, Holm-corrected across all the
  segments tested for that gate, so a release with many segments is not rolled
  back by noise. Quality is pooled over network buckets within task x tier (and
  tested release-wide too): answer quality does not depend on the bucket, and
  pooling triples the rows behind the test.
- missing inputs or a NaN/inf figure make a gate insufficient_data, never a
  pass; a gate with nothing to judge (no cold starts) is not_applicable.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from pipeline import clock, sqlfiles, stats
from pipeline.config import Config
from pipeline.errors import UnknownRelease
from pipeline.output_schema import SCHEMA_VERSION
from pipeline.registry import GATE_NAMES

COUNTS_SQL = "gate/segment_counts"
QUANTILES_SQL = "gate/segment_quantiles"
DEVICE_DAYS_SQL = "gate/device_days"
_QUANTILE_FIGURES = ("peak", "resident", "total", "cold", "rise")
GATE_ORDER = list(GATE_NAMES)
LEVEL_NAMES = {0: "segment", 1: "task x tier (all buckets)", 2: "task x bucket (all tiers)", 3: "task",
               7: "release"}


@dataclass
class GateCheck:
    gate: str
    mode: str
    status: str = "pass"  # pass | fail | insufficient_data | not_applicable
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

    @property
    def blocks(self) -> bool:
        return self.mode == "enforce" and self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("status", "mode", "measured", "threshold", "baseline", "baseline_level",
                                           "rows", "p_value", "borderline", "note", "sql")}
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
    decision: str = "keep_edge"
    needs_rows: int | None = None

    @property
    def key(self) -> str:
        return f"{self.task}/{self.device_tier}/{self.network_bucket}"

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
    verdict: str
    evaluated_at: datetime
    as_of: datetime
    window_start: datetime
    config_source: str
    config_digest: str
    segments: list[Segment]
    release_wide: dict[str, GateCheck]
    note: str = ""

    @property
    def exit_code(self) -> int:
        return {"keep_edge": 0, "partial_rollback": 1, "rollback_to_cloud": 1, "insufficient_data": 3}[self.verdict]

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

    def __init__(self, counts: list[dict[str, Any]], quantiles: list[dict[str, Any]]):
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


def _budget(check: GateCheck, row: dict, prefix: str, threshold: float, config: Config) -> GateCheck:
    """A p95 budget: the point estimate decides; the interval is reported."""
    n, p95 = row[f"{prefix}_n"], row[f"{prefix}_p95"]
    check.threshold, check.rows, check.sql = threshold, n, f"sql/{QUANTILES_SQL}.sql"
    if n < config.min_measured_rows or not _finite(p95):
        check.status = "insufficient_data"
        check.note = f"{n} rows have a value; {config.min_measured_rows} needed"
        return check
    check.measured = p95
    check.interval = stats.quantile_interval(row[f"{prefix}_grid"], n, 0.95, config.statistics.confidence)
    check.status = "fail" if p95 > threshold else "pass"
    if check.interval:
        check.borderline = check.interval[0] <= threshold < check.interval[1]
    return check


class _Evaluation:
    def __init__(self, figures: _Figures, device_days: dict[tuple, tuple[int, int]], config: Config):
        self.f = figures
        self.device_days = device_days
        self.config = config
        self.alpha = 1 - config.statistics.confidence
        self.tests: dict[str, dict[Any, float]] = {}  # gate family -> test key -> p-value

    def _test(self, family: str, key: Any, p: float) -> None:
        self.tests.setdefault(family, {})[key] = p

    def segment(self, row: dict[str, Any]) -> Segment:
        c = self.config
        task, tier, bucket = row["task"], row["device_tier"], row["network_bucket"]
        gates = c.gates_for(task)
        key = (task, tier, bucket)
        checks: dict[str, GateCheck] = {}

        def new(name: str) -> GateCheck:
            checks[name] = GateCheck(name, getattr(gates, name).mode)
            return checks[name]

        _budget(new("peak_memory"), row, "peak", gates.peak_memory.max_p95_ratio, c)
        _budget(new("resident_memory"), row, "resident", gates.resident_memory.max_p95_ratio, c)
        _budget(new("inference_duration"), row, "total", gates.inference_duration.max_p95_ms, c)
        cold = new("cold_start")
        if row["cold_n"] == 0:
            cold.status, cold.threshold, cold.note = "not_applicable", gates.cold_start.max_p95_ms, "no cold starts"
        else:
            # cold starts are rare by design (a warm model has none): every measured one counts
            _budget(cold, row, "cold", gates.cold_start.max_p95_ms, dataclasses.replace(c, min_measured_rows=1))
        checks["quality_loss"] = GateCheck("quality_loss", gates.quality_loss.mode)  # filled in per task x tier

        det = new("failure_detectability")
        det.threshold, det.rows = gates.failure_detectability.min_share, row["failures"]
        if row["failures"] == 0:
            det.status, det.note = "not_applicable", "no failures"
        else:
            det.measured = row["detected"] / row["failures"]
            det.interval = stats.wilson(row["detected"], row["failures"], c.statistics.confidence)
            self._test("failure_detectability", key,
                       stats.p_rate_below(row["detected"], row["failures"], det.threshold))

        fb = new("fallback_rate")
        fb.threshold, fb.rows = gates.fallback_rate.max_rate, row["rows"]
        fb.measured = row["fallbacks"] / row["rows"]
        fb.interval = stats.wilson(row["fallbacks"], row["rows"], c.statistics.confidence)
        base, level = self.f.cloud_baseline(task, tier, bucket, c.min_cloud_rows_for_baseline)
        self._test("fallback_ceiling", key, stats.p_rate_above(row["fallbacks"], row["rows"], fb.threshold))
        if base is None:
            fb.status, fb.note = "insufficient_data", "no cloud baseline with enough rows"
        else:
            fb.baseline, fb.baseline_level = base["fallbacks"] / base["rows"], level
            margin = gates.fallback_rate.max_excess_over_cloud
            fb.extra["max_excess_over_cloud"] = margin
            self._test("fallback_excess", key, stats.p_excess_above(
                row["fallbacks"], row["rows"], base["fallbacks"], base["rows"], margin))

        weak = new("weak_network_latency")
        if bucket != "weak":
            weak.status, weak.note = "not_applicable", "only judged in weak networks"
        else:
            self._weak_latency(weak, row, task, tier)

        th = new("thermal")
        _budget(th, row, "rise", gates.thermal.max_p95_rise_c, c)
        th.extra["max_throttled_share"] = gates.thermal.max_throttled_share
        if row["throttled_n"] >= c.min_measured_rows:
            th.extra["throttled_share"] = row["throttled"] / row["throttled_n"]
            self._test("throttled_share", key,
                       stats.p_rate_above(row["throttled"], row["throttled_n"], gates.thermal.max_throttled_share))
        elif th.status != "insufficient_data":
            th.status, th.note = "insufficient_data", f"{row['throttled_n']} rows report throttling"

        dd = new("daily_edge_seconds")
        days, over = self.device_days.get(key, (0, 0))
        dd.threshold, dd.rows = gates.daily_edge_seconds.max_share_over_cap, days
        dd.extra["cap_seconds"] = c.network.daily_edge_seconds_cap
        if days:
            dd.measured = over / days
            dd.interval = stats.wilson(over, days, c.statistics.confidence)
            dd.status = "fail" if dd.measured > dd.threshold else "pass"
        else:
            dd.status = "insufficient_data"
        return Segment(task, tier, bucket, row["rows"], checks)

    def _weak_latency(self, check: GateCheck, row: dict, task: str, tier: str) -> None:
        """Edge must beat cloud where networks are weak: the baseline stays in the weak bucket
        (cloud latency there does not depend on the phone), own segment first, then all tiers."""
        c = self.config
        base, level = None, None
        for lvl, key in ((0, (task, tier, "weak")), (2, (task, "*", "weak"))):
            cand = self.f.get("cloud", key)
            if cand and cand["total_n"] >= c.min_cloud_rows_for_baseline:
                base, level = cand, LEVEL_NAMES[lvl]
                break
        check.rows, check.sql = row["total_n"], f"sql/{QUANTILES_SQL}.sql"
        if base is None or row["total_n"] < c.min_measured_rows:
            check.status, check.note = "insufficient_data", "too few weak-network rows on one side"
            return
        conf = c.statistics.confidence
        check.measured, check.baseline, check.baseline_level = row["total_p95"], base["total_p95"], level
        check.threshold = base["total_p95"]
        check.interval = stats.quantile_interval(row["total_grid"], row["total_n"], 0.95, conf)
        cloud_iv = stats.quantile_interval(base["total_grid"], base["total_n"], 0.95, conf)
        check.extra["baseline_interval_95"] = list(cloud_iv) if cloud_iv else None
        # fails on evidence: the edge's interval lies wholly above the cloud's
        slower = bool(check.interval and cloud_iv and check.interval[0] > cloud_iv[1])
        check.status = "fail" if slower else "pass"
        check.borderline = not slower and check.measured >= check.baseline

    def quality(self, segments: list[Segment]) -> GateCheck:
        """Pooled per task x tier; returns the release-wide check."""
        c = self.config
        conf = c.statistics.confidence
        pools: dict[tuple, GateCheck] = {}
        for task, tier in sorted({(s.task, s.device_tier) for s in segments}):
            edge = self.f.get("edge", (task, tier))
            base, level = self.f.cloud_baseline(task, tier, None, c.min_cloud_rows_for_baseline)
            pools[(task, tier)] = self._quality_check(edge, base, level, c.gates_for(task), conf, (task, tier))
        edge_all, cloud_all = self.f.get("edge", ()), self.f.get("cloud", ())
        enough = cloud_all and cloud_all["rows"] >= c.min_cloud_rows_for_baseline
        release_wide = self._quality_check(edge_all, cloud_all if enough else None, "release", c.gates,
                                           conf, "release")
        self._decide_tests()
        for check_key, check in list(pools.items()) + [("release", release_wide)]:
            self._settle(check, "quality", check_key)
        for s in segments:
            pooled = pools[(s.task, s.device_tier)]
            s.checks["quality_loss"] = dataclasses.replace(pooled, mode=s.checks["quality_loss"].mode,
                                                           extra=dict(pooled.extra),
                                                           note="pooled over network buckets")
        return release_wide

    def _quality_check(self, edge: dict | None, base: dict | None, level: str | None, gates: Any,
                       conf: float, key: Any) -> GateCheck:
        check = GateCheck("quality_loss", gates.quality_loss.mode, threshold=gates.quality_loss.max_relative_loss)
        if not edge or not base or base["adopted"] == 0:
            check.status, check.note = "insufficient_data", "no cloud baseline with enough rows"
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
        self._test("quality", key, stats.p_relative_loss_above(
            edge["adopted"], edge["rows"], base["adopted"], base["rows"], check.threshold))
        return check

    def _decide_tests(self) -> None:
        self.rejected = {family: stats.holm(ps, self.alpha) for family, ps in self.tests.items()}

    def _settle(self, check: GateCheck, family: str, key: Any) -> None:
        if check.status in ("insufficient_data", "not_applicable") or key not in self.tests.get(family, {}):
            return
        check.p_value = self.tests[family][key]
        if key in self.rejected[family]:
            check.status = "fail"

    def settle_rates(self, segments: list[Segment]) -> None:
        for s in segments:
            key = (s.task, s.device_tier, s.network_bucket)
            self._settle(s.checks["failure_detectability"], "failure_detectability", key)
            fb = s.checks["fallback_rate"]
            if fb.status != "insufficient_data":
                ceiling = key in self.rejected.get("fallback_ceiling", set())
                excess = key in self.rejected.get("fallback_excess", set())
                fb.p_value = min(self.tests.get("fallback_ceiling", {}).get(key, 1.0),
                                 self.tests.get("fallback_excess", {}).get(key, 1.0))
                fb.status = "fail" if ceiling or excess else "pass"
            th = s.checks["thermal"]
            if key in self.rejected.get("throttled_share", set()) and th.status == "pass":
                th.status, th.note = "fail", "throttled share above its ceiling"
                th.p_value = self.tests["throttled_share"][key]


def _decide(segment: Segment, config: Config) -> None:
    enforced = [c for c in segment.checks.values() if c.mode == "enforce"]
    if segment.rows < config.min_rows_per_segment:
        segment.decision = "insufficient_data"
        segment.needs_rows = config.min_rows_per_segment - segment.rows
    elif any(c.status == "fail" for c in enforced):
        segment.decision = "rollback_to_cloud"
    elif any(c.status == "insufficient_data" for c in enforced):
        segment.decision = "insufficient_data"
    else:
        segment.decision = "keep_edge"


def _dicts(cur: Any) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def releases(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in sqlfiles.run(con, "gate/releases").fetchall()]


def evaluate_gate(con: duckdb.DuckDBPyConnection, release: str, config: Config,
                  as_of: datetime | None = None, now: datetime | None = None) -> GateResult:
    now = clock.now(now or as_of)
    as_of = as_of or now
    known = releases(con)
    if release not in known:
        if not known:
            raise UnknownRelease("no telemetry in this database yet; ingest some first (pipeline ingest PATH)")
        raise UnknownRelease(f"no release {release!r} in the database; releases present: {', '.join(known)}. "
                             "Did you ingest its files? (pipeline ingest PATH)")
    window_start = as_of - timedelta(days=config.window_days)
    params = {"release": release, "window_start": window_start, "window_end": as_of}
    figures = _Figures(_dicts(sqlfiles.run(con, COUNTS_SQL, params)),
                       _dicts(sqlfiles.run(con, QUANTILES_SQL, {**params, "fractions": [0.95, *stats.QUANTILE_GRID]})))
    device_days = {(t, tier, b): (n, over)
                   for t, tier, b, n, over in sqlfiles.run(con, DEVICE_DAYS_SQL, params).fetchall()}
    ev = _Evaluation(figures, device_days, config)
    segments = [ev.segment(row) for row in figures.segments()]
    release_wide = {"quality_loss": ev.quality(segments)} if segments else {}
    ev.settle_rates(segments)
    for s in segments:
        _decide(s, config)
    verdict, note = _verdict(segments, release_wide, figures)
    return GateResult(release, verdict, now, as_of, window_start, config.source, config.digest, segments,
                      release_wide, note)


def _verdict(segments: list[Segment], release_wide: dict[str, GateCheck], figures: _Figures) -> tuple[str, str]:
    if not segments:
        cloud = figures.get("cloud", ())
        if cloud:
            return "insufficient_data", "the release has only cloud rows in the window: no edge route to judge"
        return "insufficient_data", "the release has no rows in the evaluation window"
    judged = [s for s in segments if s.decision != "insufficient_data"]
    if not judged:
        return "insufficient_data", "no segment has enough rows to judge"
    if any(c.blocks for c in release_wide.values()):
        return "rollback_to_cloud", "a release-wide gate failed"
    rolled = [s for s in judged if s.decision == "rollback_to_cloud"]
    if len(rolled) == len(judged):
        return "rollback_to_cloud", "every judged segment rolls back"
    if rolled:
        return "partial_rollback", f"{len(rolled)} of {len(judged)} judged segments roll back"
    return "keep_edge", f"all {len(judged)} judged segments keep the edge route"
