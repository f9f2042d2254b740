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

Why one module: measuring is one pass over the SQL's rows in which every gate reads the same figures;
`_Measure`, its one class, is the part to split by gate family next.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import duckdb

from pipeline.common import clock
from pipeline.common.config import Config
from pipeline.common.errors import UnknownRelease
from pipeline.common.registry import BY_NAME, GATE_NAMES, GATES, GateName
from pipeline.common.vocabulary import Bucket, Side, Status, Verdict
from pipeline.gate import assignment, cells, quantiles, source, stats
from pipeline.gate.decide import budget_split, settle
from pipeline.gate.figures import (
    COUNTS_SQL,
    DEVICE_DAYS_SQL,
    KILL_MIXTURE_WIDTH,
    MIN_FALLBACK_TAU,
    TIER_LEVEL,
    counts,
    day_counts,
    ratio,
)
from pipeline.gate.result import DETECT_POWER, GateCheck, GateResult, Segment, Sizing, Test
from pipeline.gate.window import Window, gate_window
from pipeline.warehouse import sketch, sqlfiles

QUANTILES_SQL = quantiles.HISTOGRAMS_SQL
WEAK_SQL = "gate/weak_latency"
ERROR_DAYS_SQL = "gate/error_days"
KEPT_DAYS_SQL = "gate/kept_device_days"
RETENTION_SQL = "gate/retention"
RETENTION_TAU = 0.03  # the mixing scale of the retention test: a drop of 3 points past the tolerance at least
RETENTION_SIZED_DROP = 0.05  # devices_to_detect of retention: for a drop of 5 points in the share returning
LEVEL_NAMES = {0: "segment", 1: "task x tier (all buckets)", 2: "task x bucket (all tiers)", 3: "task",
               7: "release"}
P95 = quantiles.P95
# Mixing scale tau of the sequential z tests (stats.msprt_p_value): the effect worth detecting,
# on each test's own scale. Adoption: a loss of twice the tolerance; fallback excess: the margin;
# weak-network latency: an edge p95 25 % slower than the cloud's (log scale).
WEAK_LATENCY_TAU = math.log(1.25)


def _level_key(row: dict[str, Any]) -> tuple:
    level = row["level"]
    return {0: (row["task"], row["device_tier"], row["network_bucket"]), 1: (row["task"], row["device_tier"]),
            2: (row["task"], "*", row["network_bucket"]), 3: (row["task"],), TIER_LEVEL: _tier_key(row["device_tier"]),
            7: ()}[level]


def _tier_key(tier: str) -> tuple[str, str, str]:
    """The level key of a device tier's device-days (sql/gate/device_days.sql's TIER_LEVEL)."""
    return "*", tier, "*"


class _Figures:
    """The SQL's rows, found by side and level; quantile and weak-network figures merged in."""

    def __init__(self, counts: list[dict[str, Any]], quantile_rows: list[dict[str, Any]], weak: list[dict[str, Any]],
                 relative_error: float):
        self.relative_error = relative_error  # the histograms', folded into every quantile interval
        self.by = {(r["side"], _level_key(r)): r for r in counts}
        for q in quantile_rows:
            row = self.by[(q["side"], _level_key(q))]
            for name in quantiles.FIGURES:
                row[f"{name}_p95"], row[f"{name}_grid"] = q[f"{name}_p95"], q[f"{name}_grid"]
        self.weak = {(w["side"], _level_key(w)): w for w in weak}

    def get(self, side: str, key: tuple) -> dict[str, Any] | None:
        return self.by.get((side, key))

    def segments(self) -> list[dict[str, Any]]:
        return sorted((r for (side, key), r in self.by.items()
                       if side == Side.EDGE and len(key) == 3 and key[1] != "*"),
                      key=lambda r: (r["task"], r["device_tier"], r["network_bucket"]))

    def cloud_baseline(self, task: str, tier: str, bucket: str | None, minimum: int) -> tuple[dict | None, str | None]:
        """The contract's widening: own segment, then same task and tier, then same task."""
        keys = ([(0, (task, tier, bucket))] if bucket else []) + [(1, (task, tier)), (3, (task,))]
        for level, key in keys:
            row = self.get(Side.CLOUD, key)
            if row and row["rows"] >= minimum:
                return row, LEVEL_NAMES[level]
        return None, None


def _finite(*values: Any) -> bool:
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


class _Measure:
    """Step 1: one method per gate of the registry, each returning an undecided GateCheck."""

    def __init__(self, figures: _Figures, device_days: dict[tuple, dict[str, Any]],
                 error_days: dict[tuple, dict[str, int]], returning: dict[tuple, dict[str, Any]] | None,
                 config: Config):
        self.f = figures
        self.returning = returning  # retention.sql by (side, (task, tier) or ()); None: requests are assigned
        self.device_days = device_days  # by level key (_level_key): a segment's, the release's ()
        self.error_days = error_days  # by level key: error_code -> device-days with it
        self.config = config
        self.sequential = config.statistics.method == "sequential"
        self.conf = config.statistics.confidence
        self.split = budget_split(config)
        self.by_device = config.statistics.estimand != "requests"  # quality compares devices whole
        self.pools: dict[tuple, GateCheck] = {}  # quality, per task x tier
        self.retention_pools: dict[tuple, GateCheck] = {}  # retention, per task x tier

    def segment(self, row: dict[str, Any]) -> Segment:
        gates = self.config.gates_for(row["task"])
        checks = {spec.name: getattr(self, spec.name)(row, gates) for spec in GATES}
        return Segment(row["task"], row["device_tier"], row["network_bucket"], row["rows"], checks,
                       self.config.min_rows_per_segment)

    def ratio(self, row: dict[str, Any], k: str, n: str) -> stats.DeviceRatio:
        return ratio(row, k, n, self.config.min_devices)

    def _new(self, name: str, gates: Any) -> GateCheck:
        settings = getattr(gates, name)
        key = BY_NAME[name].threshold_key
        return GateCheck(name, settings.mode, settings.burden, threshold=getattr(settings, key) if key else None,
                         main_test=BY_NAME[name].tests[0])

    def _rate_test(self, check: GateCheck, name: str, r: stats.DeviceRatio, p0: float, harm_above: bool,
                   what: str, edge_devices: int | None = None, relative_width: float | None = None) -> None:
        """A device-level rate against a fixed threshold p0 (harm_above: harm is a rate above p0). When
        even its most extreme outcome could not decide, the check is short of data and says how many
        rows it needs (effective rows times the design effect observed). relative_width: the sequential
        test's prior (stats.mixture_width; None: the default)."""
        safe = check.burden == "prove_safe"
        above = harm_above != safe  # the alternative the test looks for
        w = relative_width
        p = stats.rate_p_value(r.k_eff, r.n_eff, p0, above, self.sequential, w)
        kind = "mixture likelihood ratio (always valid)" if self.sequential else "exact binomial"
        check.tests[name] = Test(p, check.burden, f"{kind} on device-adjusted counts: {what} "
                                                  f"{'<' if above != harm_above else '>'} {p0:g}")
        if name == check.main_test:
            check.bounds = lambda a: stats.rate_bounds(r.k_eff, r.n_eff, a, self.sequential, w)
            check.interval_method = f"{kind} inverted: the rates no test at this alpha rejects"
        if r.devices < self.config.min_devices:
            check.add_note(f"only {r.devices} devices: their rows counted as fully correlated")
        p1 = _twice_the_tolerance(p0, harm_above)
        if not safe and name == check.main_test and p1 is not None:
            check.sizing = Sizing(name, lambda a: _rows(stats.rate_units_needed(
                p0, p1, harm_above, a, DETECT_POWER, self.sequential, relative_width=w), r.design_effect), r.n,
                edge_devices or r.devices, past=r.rate > p0 if harm_above else r.rate < p0,
                catches=f"a {what} of {p1:.3g}")
        alpha = 1 - self.conf if safe else self.split[(check.gate, name)]
        need = stats.values_needed(p0, above, alpha, self.sequential, relative_width=w)
        if need is not None and r.n_eff < need and check.values_needed is None:
            check.values_needed = math.ceil(need * r.design_effect)
            check.short_of_data = True
            check.add_note(f"needs {check.values_needed:,} values for any decision ({int(r.n):,} now, "
                             f"design effect {r.design_effect:.2f})")

    def _z_test(self, check: GateCheck, name: str, harm: float, var: float, tau: float, method: str,
                shown: Callable[[float], float] | None = None) -> None:
        """A z test of `harm` (positive: the threshold is broken) over its variance; the statistic's sign
        follows the burden, so a small p is evidence of harm (prove_harm) or of safety (prove_safe).
        `shown` maps a value of harm's scale to the figure shown (increasing): with it, the check's interval
        is the test inverted, harm +- its boundary in standard errors at the level the test gets."""
        z = harm / math.sqrt(var) if var > 0 else math.nan
        if check.burden == "prove_safe":
            z = -z
        check.tests[name] = Test(stats.z_p_value(z, var, tau, self.sequential), check.burden, method)
        if shown is not None and name == check.main_test and var > 0 and math.isfinite(var):
            se = math.sqrt(var)

            def bounds(alpha: float) -> tuple[float | None, float | None]:
                half = stats.z_boundary(var, tau, alpha, self.sequential) * se
                return (_shown_or_open(shown, harm - half), _shown_or_open(shown, harm + half)) \
                    if math.isfinite(half) else (None, None)

            check.bounds = bounds
            check.interval_method = ("mixture SPRT confidence sequence" if self.sequential else "one-look z interval") \
                + ": the values no test at this alpha rejects"

    def _budget(self, name: str, row: dict, gates: Any, min_rows: int | None = None) -> GateCheck:
        """A p95 budget: the share of values above the budget against 5 %, device-level."""
        check = self._new(name, gates)
        prefix = BY_NAME[name].figure
        n, p95 = row[f"{prefix}_n"], row.get(f"{prefix}_p95")
        check.rows, check.devices = n, row[f"{prefix}_n_devices"]
        check.sql = f"sql/{COUNTS_SQL}.sql, sql/{QUANTILES_SQL}.sql"
        needed = self.config.min_measured_rows if min_rows is None else min_rows
        if n < needed or not _finite(p95):
            check.short_of_data, check.note = True, f"{n} rows have a value; {needed} needed"
            return check
        over = self.ratio(row, f"{prefix}_over", f"{prefix}_n")
        check.measured, check.design_effect = p95, over.design_effect
        check.extra["share_over_budget"] = over.rate
        grid, n_eff = row[f"{prefix}_grid"], over.n_eff
        check.reading_interval = self._interval(grid, n_eff)
        self._rate_test(check, "", over, 1 - P95, harm_above=True, what="share above the budget")
        check.bounds = lambda a: self._widened(stats.quantile_bounds_by_test(grid, n_eff, P95, a, self.sequential))
        check.interval_method = ("the p95s no test at this alpha rejects: the share of values above each "
                                 "order statistic tested against 5 %")
        return check

    def _interval(self, grid: Any, n: float) -> tuple[float | None, float | None] | None:
        """The p95's fixed-sample interval from order statistics (for reading), widened by the sketch's error."""
        return self._widened(stats.quantile_interval(grid, n, P95, self.conf))

    def _widened(self, interval: tuple[float | None, float | None] | None) -> tuple[float | None, float | None] | None:
        """An interval of a p95, widened by the error of the histograms that gave the grid."""
        return sketch.widen(interval, self.f.relative_error)

    def peak_memory(self, row: dict, gates: Any) -> GateCheck:
        return self._budget(GateName.PEAK_MEMORY, row, gates)

    def resident_memory(self, row: dict, gates: Any) -> GateCheck:
        return self._budget(GateName.RESIDENT_MEMORY, row, gates)

    def inference_duration(self, row: dict, gates: Any) -> GateCheck:
        return self._budget(GateName.INFERENCE_DURATION, row, gates)

    def cold_start(self, row: dict, gates: Any) -> GateCheck:
        if row["cold_n"] == 0:
            check = self._new(GateName.COLD_START, gates)
            check.inapplicable, check.note = True, "no cold starts"
            return check
        # cold starts are rare by design: the test's own values_needed says when there are enough
        return self._budget(GateName.COLD_START, row, gates, min_rows=1)

    def quality_loss(self, row: dict, gates: Any) -> GateCheck:
        key = (row["task"], row["device_tier"])
        if key not in self.pools:
            self.pools[key] = self._pool_quality(row["task"], row["device_tier"], gates)
        return self.pools[key]

    def _pool_quality(self, task: str, tier: str, gates: Any) -> GateCheck:
        """Quality of task x tier, stratified over network buckets (an edge mix with offline rows is never
        compared with a cloud mix without them); the cloud baseline widens to the task over all tiers."""
        c = self.config
        buckets = sorted({k[2] for (side, k) in self.f.by
                          if side == Side.EDGE and len(k) == 3 and k[:2] == (task, tier)})
        edge_pool = self.f.get(Side.EDGE, (task, tier))
        for level, cloud_key in ((1, lambda b: (task, tier, b)), (2, lambda b: (task, "*", b))):
            cloud_pool = self.f.get(Side.CLOUD, (task, tier) if level == 1 else (task,))
            strata = [(self.f.get(Side.EDGE, (task, tier, b)), self.f.get(Side.CLOUD, cloud_key(b))) for b in buckets]
            strata = [(e, cl) for e, cl in strata if e and cl]
            if cloud_pool and sum(cl["rows"] for _, cl in strata) >= c.min_cloud_rows_for_baseline:
                offline = Bucket.OFFLINE in buckets
                note = "stratified over network buckets" + (
                    "; offline rows not compared (no cloud baseline offline)" if offline else "")
                return self._quality(strata, edge_pool, cloud_pool, LEVEL_NAMES[level], gates, note, offline)
        check = self._new(GateName.QUALITY_LOSS, gates)
        check.short_of_data, check.note = True, "no cloud baseline with enough rows"
        return check

    def gatekeepers(self) -> dict[str, GateCheck]:
        """Per rate or p95-budget gate that can fail on evidence of harm, its release-wide check: all edge rows,
        each against its own task's budget (p95s: the share above it against 5 %) or the gate's one threshold.
        It is the primary hypothesis of its gate's family and carries alpha only: it never blocks."""
        row = self.f.get(Side.EDGE, ())
        out: dict[str, GateCheck] = {}
        if row is None:
            return out
        tasks = sorted({k[0] for (side, k) in self.f.by if side == Side.EDGE and len(k) == 3})
        for spec in GATES:
            settings = [getattr(self.config.gates_for(t), spec.name) for t in tasks]
            if not settings or any(g.mode != "enforce" or g.burden != "prove_harm" for g in settings):
                continue
            if spec.kind == "p95_budget":
                n, k, p0, harm_above, what = f"{spec.figure}_n", f"{spec.figure}_over", 1 - P95, True, \
                    "share of values above their task's budget"
            elif spec.name in (GateName.FAILURE_DETECTABILITY, GateName.FALLBACK_RATE):
                thresholds = {getattr(g, spec.threshold_key) for g in settings}
                if len(thresholds) != 1:
                    continue  # tasks with their own thresholds: no one release-wide hypothesis
                detected = spec.name == GateName.FAILURE_DETECTABILITY
                n, k = ("failures", "detected") if detected else ("rows", "fallbacks")
                p0, harm_above, what = thresholds.pop(), spec.direction == "max", spec.label
            else:
                continue
            r = self.ratio(row, k, n)
            if r.n <= 0:
                continue
            check = self._new(spec.name, self.config.gates)
            check.release_wide, check.threshold, check.measured = True, p0, r.rate
            check.rows, check.devices, check.design_effect = int(row[n] or 0), r.devices, r.design_effect
            check.note = "release-wide gatekeeper: carries its gate's alpha to the segments, never blocks"
            self._rate_test(check, spec.tests[0], r, p0, harm_above, what, edge_devices=row["devices"])
            out[spec.name] = check
        return out

    def release_quality(self) -> GateCheck:
        strata = [(r, self.f.get(Side.CLOUD, key)) for (side, key), r in self.f.by.items()
                  if side == Side.EDGE and len(key) == 3 and key[1] != "*"]
        strata = [(e, cl) for e, cl in strata if cl]
        edge_all, cloud_all = self.f.get(Side.EDGE, ()), self.f.get(Side.CLOUD, ())
        if not cloud_all or sum(cl["rows"] for _, cl in strata) < self.config.min_cloud_rows_for_baseline:
            check = self._new(GateName.QUALITY_LOSS, self.config.gates)
            check.short_of_data, check.note = True, "no cloud baseline with enough rows"
            return check
        check = self._quality(strata, edge_all, cloud_all, "release", self.config.gates,
                              "stratified over task x tier x network bucket")
        check.release_wide = True
        return check

    def _quality(self, cells: list[tuple[dict, dict]], edge_pool: dict, cloud_pool: dict, level: str,
                 gates: Any, note: str, offline: bool = False) -> GateCheck:
        """Farrington-Manning score test of edge >= (1 - tolerance) x cloud adoption, each arm's variance times
        its device design effect. Counting requests: strata (network buckets) combined with Mantel-Haenszel
        weights, with the pool's design effect. Counting devices (per_device, capped_requests): the pool's
        devices compared whole, each by its rate over its online rows (offline rows have no cloud baseline),
        one stratum with each arm's own design effect: a device's rate within one bucket is noisier than its
        rate over the pool, so the pool's design effect would understate a bucket's variance."""
        check = self._new(GateName.QUALITY_LOSS, gates)
        if self.by_device:
            cells = [(edge_pool, cloud_pool)]
            n, k, note = "online_rows", "online_adopted", "devices compared whole over their online rows" + (
                "; offline rows not compared (no cloud baseline offline)" if offline else "")
            edge, cloud = self.ratio(edge_pool, k, n), self.ratio(cloud_pool, k, n)
            deff_e, deff_c = edge.design_effect, cloud.design_effect
            strata = [stats.Stratum(edge, cloud)] if edge.n > 0 and cloud.n > 0 else []
        else:
            n, k = "rows", "adopted"
            deff_e = self.ratio(edge_pool, k, n).design_effect
            deff_c = self.ratio(cloud_pool, k, n).design_effect
            strata = [stats.Stratum(self.ratio(e, k, n).in_pool(deff_e), self.ratio(cl, k, n).in_pool(deff_c))
                      for e, cl in cells]
        if not strata or all(s.cloud.k == 0 for s in strata):
            check.short_of_data, check.note = True, "no cloud baseline with enough rows"
            return check
        theta = 1 - check.threshold
        loss, interval = stats.stratified_relative_loss(strata, self.conf)
        d, var = stats.stratified_ratio_score(strata, theta)
        cloud_rate = sum(s.cloud.k for s in strata) / sum(s.cloud.n for s in strata)
        check.measured, check.reading_interval, check.baseline, check.baseline_level = loss, interval, cloud_rate, level
        check.rows = int(sum(e[n] for e, _ in cells))
        check.devices = edge_pool[f"{n}_devices"] if self.by_device else edge_pool["devices"]
        check.design_effect = deff_e
        check.note = note
        tau = check.threshold * cloud_rate * 2
        self._z_test(check, "", -d, var, tau, ("mixture SPRT" if self.sequential else "one look")
                     + (" on the Farrington-Manning score of device-level rates" if self.by_device else
                        " on the stratified Farrington-Manning score, device design effects"))
        check.bounds = lambda a: _loss_bounds(strata, a, tau, self.sequential)
        check.interval_method = (("mixture SPRT confidence sequence" if self.sequential else "one-look interval")
                                 + ": the relative losses whose score test at this alpha does not reject")
        units = sum(s.edge.n for s in strata)
        cloud_units = sum(s.cloud.n for s in strata)
        if units and cloud_units and check.burden == "prove_harm":
            check.sizing = Sizing("", lambda a: stats.units_needed_ratio(
                cloud_rate, check.threshold, check.threshold, a, DETECT_POWER, deff_e, deff_c, cloud_units / units,
                tau, self.sequential), units, check.devices, past=loss > check.threshold,
                catches="a loss of twice the tolerance")
        check.extra.update(cloud_rows=int(sum(cl[n] for _, cl in cells)),
                           cloud_devices=cloud_pool[f"{n}_devices"] if self.by_device else cloud_pool["devices"],
                           cloud_design_effect=deff_c, edge_adoption=sum(s.edge.k for s in strata) / max(1, units),
                           edge_units=units, cloud_units=cloud_units,
                           estimand=self.config.statistics.estimand)
        return check

    def retention(self, row: dict, gates: Any) -> GateCheck:
        key = (row["task"], row["device_tier"])
        if key not in self.retention_pools:
            self.retention_pools[key] = self._retention(gates, key)
        return self.retention_pools[key]

    def release_retention(self) -> GateCheck:
        check = self._retention(self.config.gates, ())
        check.release_wide = True
        return check

    def _retention(self, gates: Any, key: tuple) -> GateCheck:
        """The share of cohort devices that come back, the edge arm's below the cloud hold-back's by at most
        max_drop: one Bernoulli per device, so the two arms' binomial variances are the device-level ones;
        a mixture SPRT (or one-look z test) of (cloud - edge) - max_drop. A task x tier's devices are those
        whose first request was of the task (sql/gate/retention.sql)."""
        check = self._new(GateName.RETENTION, gates)
        check.sql = f"sql/{RETENTION_SQL}.sql"
        settings = gates.retention
        check.extra["horizon_days"] = settings.horizon_days
        if self.returning is None:
            check.inapplicable = True
            check.note = "the hold-back is assigned per request (assignment.unit): no device is on one arm only"
            return check
        edge, cloud = self.returning.get((Side.EDGE, key)), self.returning.get((Side.CLOUD, key))
        ne, nc = (edge or {}).get("devices", 0), (cloud or {}).get("devices", 0)
        check.rows = check.devices = ne
        if min(ne, nc) < self.config.min_devices:
            check.short_of_data = True
            check.note = (f"{ne:,} edge and {nc:,} cloud devices first seen at least {settings.horizon_days:g} days "
                          f"before the window's end; {self.config.min_devices} needed on each arm")
            return check
        pe, pc = edge["returned"] / ne, cloud["returned"] / nc
        drop, margin = pc - pe, settings.max_drop
        check.measured, check.baseline = drop, pc
        check.baseline_level = "release" if not key else "task x tier (devices by their first task)"
        check.extra.update(edge_return=pe, cloud_return=pc, cloud_devices=nc)
        var = pe * (1 - pe) / ne + pc * (1 - pc) / nc
        if var <= 0:  # every device returned (or none) on both arms: the pooled rate's variance
            pooled = (edge["returned"] + cloud["returned"]) / (ne + nc)
            var = max(pooled * (1 - pooled), 0.25 / (ne + nc)) * (1 / ne + 1 / nc)
        half = stats.z_two_sided(self.conf) * math.sqrt(var)
        check.reading_interval = (drop - half, drop + half)
        tau = max(2 * margin, RETENTION_TAU)
        self._z_test(check, "", drop - margin, var, tau,
                     ("mixture SPRT" if self.sequential else "one-look z test")
                     + " of cloud - edge share of devices returning against the tolerance, one Bernoulli per device",
                     shown=lambda x: x + margin)
        gap = RETENTION_SIZED_DROP - margin
        if check.burden == "prove_harm" and gap > 0:
            p1 = max(pc - RETENTION_SIZED_DROP, 0.0)
            unit_variance = p1 * (1 - p1) + pc * (1 - pc) * ne / nc  # per edge device, the cloud's spread over them
            check.sizing = Sizing("", lambda a: stats.units_needed_difference(
                gap, unit_variance, a, DETECT_POWER, tau, self.sequential), ne, ne, past=drop > margin,
                catches=f"a drop of {RETENTION_SIZED_DROP * 100:.0f} points")
        return check

    def failure_detectability(self, row: dict, gates: Any) -> GateCheck:
        check = self._new(GateName.FAILURE_DETECTABILITY, gates)
        check.rows, check.devices = row["failures"], row["failures_devices"]
        if row["failures"] == 0:
            check.inapplicable, check.note = True, "no failures"
            return check
        r = self.ratio(row, "detected", "failures")
        check.measured, check.design_effect = r.rate, r.design_effect
        check.reading_interval = stats.wilson(r.k_eff, r.n_eff, self.conf)
        self._rate_test(check, "", r, check.threshold, harm_above=False, what="detected share",
                        edge_devices=row["devices"])
        return check

    def fallback_rate(self, row: dict, gates: Any) -> GateCheck:
        c = self.config
        check = self._new(GateName.FALLBACK_RATE, gates)
        r = self.ratio(row, "fallbacks", "rows")
        check.rows, check.devices, check.design_effect = row["rows"], row["devices"], r.design_effect
        check.measured = r.rate
        check.reading_interval = stats.wilson(r.k_eff, r.n_eff, c.statistics.confidence)
        # the absolute ceiling needs no baseline; only the excess over the cloud does
        self._rate_test(check, "ceiling", r, check.threshold, harm_above=True, what="fallback rate")
        base, level = self.f.cloud_baseline(row["task"], row["device_tier"], row["network_bucket"],
                                            c.min_cloud_rows_for_baseline)
        margin = gates.fallback_rate.max_excess_over_cloud
        check.extra["max_excess_over_cloud"] = margin
        if base is None:
            check.short_of_data, check.note = True, "no cloud baseline with enough rows (ceiling judged alone)"
            return check
        cloud = self.ratio(base, "fallbacks", "rows")
        check.baseline, check.baseline_level = cloud.rate, level
        var = r.variance + cloud.variance
        if not math.isfinite(var):
            var = r.binomial_variance * r.design_effect + cloud.binomial_variance * cloud.design_effect
        tau = max(margin, MIN_FALLBACK_TAU)
        self._z_test(check, "excess", r.rate - cloud.rate - margin, var, tau,
                     ("mixture SPRT" if self.sequential else "one-look z test")
                     + " of edge - cloud fallback rate against the margin, device-level variances")
        p1 = cloud.rate + 2 * margin
        if check.burden == "prove_harm" and 0 < p1 < 1 and cloud.n > 0:
            # per edge row: the edge rate's variance at p1 plus the cloud's, spread over the edge rows
            unit_variance = (r.design_effect * p1 * (1 - p1)
                             + cloud.design_effect * cloud.rate * (1 - cloud.rate) * r.n / cloud.n)
            check.sizing = Sizing("excess", lambda a: stats.units_needed_difference(
                margin, unit_variance, a, DETECT_POWER, tau, self.sequential), r.n, r.devices,
                past=r.rate - cloud.rate > margin, catches="an excess over the cloud of twice the margin")
        return check

    def weak_network_latency(self, row: dict, gates: Any) -> GateCheck:
        """Edge must beat cloud where networks are weak: the log ratio of the p95s, each p95's variance from
        Bahadur's representation (the variance of the share above it over the density there; the share's
        design effect from the devices' intraclass correlation of log latency, stats.anova_design_effect).
        The baseline stays in the weak bucket, own segment first, then all tiers."""
        c = self.config
        check = self._new(GateName.WEAK_NETWORK_LATENCY, gates)
        if row["network_bucket"] != Bucket.WEAK:
            check.inapplicable, check.note = True, "only judged in weak networks"
            return check
        task, tier = row["task"], row["device_tier"]
        base, level, base_key = None, None, None
        for lvl, key in ((0, (task, tier, Bucket.WEAK.value)), (2, (task, "*", Bucket.WEAK.value))):
            cand = self.f.get(Side.CLOUD, key)
            if cand and cand["total_n"] >= c.min_cloud_rows_for_baseline:
                base, level, base_key = cand, LEVEL_NAMES[lvl], key
                break
        check.rows, check.devices = row["total_n"], row["total_n_devices"]
        check.sql = f"sql/{WEAK_SQL}.sql, sql/{QUANTILES_SQL}.sql"
        if base is None or row["total_n"] < c.min_measured_rows:
            check.short_of_data, check.note = True, "too few weak-network rows on one side"
            return check
        edge = self._log_p95(row, self.f.weak.get((Side.EDGE, (task, tier, Bucket.WEAK.value))))
        cloud = self._log_p95(base, self.f.weak.get((Side.CLOUD, base_key)))
        check.measured, check.baseline, check.baseline_level = row["total_p95"], base["total_p95"], level
        check.threshold = base["total_p95"]
        check.reading_interval = self._interval(row["total_grid"], row["total_n"] / (edge[2] or 1))
        check.extra["baseline_interval_95"] = list(self._interval(
            base["total_grid"], base["total_n"] / (cloud[2] or 1)) or []) or None
        if edge[1] is None or cloud[1] is None:
            check.short_of_data, check.note = True, "the p95's density could not be estimated"
            return check
        check.design_effect = edge[2]
        var = edge[1] + cloud[1]
        cloud_p95 = base["total_p95"]
        self._z_test(check, "", edge[0] - cloud[0], var, WEAK_LATENCY_TAU,
                     ("mixture SPRT" if self.sequential else "one-look z test")
                     + " of log(edge p95 / cloud p95), Bahadur variance with device-level shares",
                     shown=lambda x: cloud_p95 * math.exp(x))
        return check

    def _log_p95(self, row: dict, weak: dict | None) -> tuple[float, float | None, float | None]:
        """(log p95, its variance, the design effect of the share above it)."""
        p95, n = row["total_p95"], row["total_n"]
        if weak is None or not _finite(p95) or p95 <= 0:
            return math.nan, None, None
        deff = stats.anova_design_effect(weak["devices"], weak["total_n"], weak["total_n_nn"], weak["log_sum"],
                                         weak["log_sq"], weak["log_between"])
        h = min(stats.hall_sheather(n, P95, self.conf), 0.999 - P95, P95 - 0.80)
        spread = stats.grid_value(row["total_grid"], P95 + h) - stats.grid_value(row["total_grid"], P95 - h)
        share_var = deff * P95 * (1 - P95) / n
        if spread <= 0 or not math.isfinite(share_var):
            return math.log(p95), None, deff
        sparsity = spread / (2 * h)  # 1 / density at the p95
        return math.log(p95), share_var * sparsity**2 / p95**2, deff

    def thermal(self, row: dict, gates: Any) -> GateCheck:
        check = self._budget(GateName.THERMAL, row, gates)
        ceiling = gates.thermal.max_throttled_share
        check.extra["max_throttled_share"] = ceiling
        if row["throttled_n"] >= self.config.min_measured_rows:
            r = self.ratio(row, "throttled", "throttled_n")
            check.extra["throttled_share"] = r.rate
            self._rate_test(check, "throttled_share", r, ceiling, harm_above=True, what="throttled share")
        elif not check.short_of_data:
            check.short_of_data, check.note = True, f"{row['throttled_n']} rows report throttling"
        return check

    def daily_edge_seconds(self, row: dict, gates: Any) -> GateCheck:
        check = self._day_share(GateName.DAILY_EDGE_SECONDS, gates, _segment_key(row), "over_cap",
                                "share of device-days over the cap")
        check.extra["cap_seconds"] = self.config.network.daily_edge_seconds_cap
        return check

    def kill_rate(self, row: dict, gates: Any) -> GateCheck:
        """Judged on the segment's device tier: a kill is the device's (memory pressure, the OS killing the app),
        whatever task or network it served, and Play's vitals judge it per device. Every segment of a tier
        reads the same device-days and is one hypothesis in the gate's family (`shared`), so a tier killed on
        3 % of its device-days fails in each of its segments, however its kills fall over tasks and buckets."""
        tier = row["device_tier"]
        check = self._kills(gates, _tier_key(tier))
        check.shared = f"{tier} tier"
        if check.devices:
            check.add_note(f"judged over the {tier} tier: {check.rows:,} edge device-days of {check.devices:,} "
                           "devices, every task and network")
        return check

    def release_kills(self) -> GateCheck | None:
        """kill_rate over every edge device-day of the release: a release-wide check that blocks (Android vitals
        judge an app's whole user-perceived kill rate) and the primary hypothesis of the gate's family."""
        if () not in self.device_days:
            return None
        check = self._kills(self.config.gates, ())
        check.release_wide = True
        return check

    def _kills(self, gates: Any, key: tuple) -> GateCheck:
        check = self._day_share(GateName.KILL_RATE, gates, key, "kill_days", "share of device-days with a kill",
                                relative_width=KILL_MIXTURE_WIDTH)
        settings = gates.kill_rate
        check.extra["kill_codes"] = list(settings.kill_codes)
        dd = self.device_days.get(key)
        if dd and dd["days"]:
            # every edge error code beside it, killing or not: MODEL_LOAD_FAILED and TIMEOUT are often kills too
            check.extra["error_device_days"] = {code: {"device_days": n, "share": n / dd["days"]}
                                                for code, n in sorted(self.error_days.get(key, {}).items())}
        return check

    def judge_kept(self, check: GateCheck, kept: dict[str, Any], rolled: list[str]) -> None:
        """A failed release-wide kill_rate check judged again, at the level it had, on the edge traffic the
        release keeps once its `rolled` segments go to the cloud: the whole release rolls back only if that
        traffic is itself past the ceiling. A low-tier memory regression then rolls back the low tier, not
        the flagships whose kills were never the problem."""
        r = self.ratio(kept, "kill_days", "days") if kept.get("days") else None
        test = check.tests.get("")
        if r is None or test is None or test.alpha is None:
            return
        p = stats.rate_p_value(r.k_eff, r.n_eff, check.threshold, True, self.sequential, KILL_MIXTURE_WIDTH)
        check.extra["kept_traffic"] = {"segments_rolled_back": len(rolled), "measured": r.rate,
                                       "device_days": int(r.n), "devices": r.devices, "p_value": p}
        if math.isfinite(p) and p <= test.alpha:
            check.add_note(f"the edge traffic kept without the {len(rolled)} segments rolled back still has a "
                             f"kill on {r.rate:.2%} of its device-days (p = {p:.2g})")
            return
        check.status = Status.PASS
        check.add_note(f"the excess is in the {len(rolled)} segments rolled back; the edge traffic kept has a kill "
                         f"on {r.rate:.2%} of its device-days, not shown past the ceiling (p = {p:.2g})")

    def _day_share(self, name: str, gates: Any, key: tuple, k: str, what: str,
                   relative_width: float | None = None) -> GateCheck:
        """A share of edge device-days (device-days summed per device) against the gate's ceiling."""
        check = self._new(name, gates)
        check.sql = f"sql/{DEVICE_DAYS_SQL}.sql"
        dd = self.device_days.get(key)
        if not dd:
            check.short_of_data, check.note = True, "no device-days in the window"
            return check
        r = self.ratio(dd, k, "days")
        check.rows, check.devices, check.design_effect, check.measured = int(r.n), r.devices, r.design_effect, r.rate
        check.reading_interval = stats.wilson(r.k_eff, r.n_eff, self.conf)
        self._rate_test(check, "", r, check.threshold, harm_above=True, what=what, relative_width=relative_width)
        return check


def _segment_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["task"], row["device_tier"], row["network_bucket"]


def _shown_or_open(shown: Callable[[float], float], x: float) -> float | None:
    """A bound on the shown scale; None (open) where it is past what a float holds (a p95 of e^800 ms)."""
    try:
        value = shown(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _loss_bounds(strata: Sequence[stats.Stratum], alpha: float, tau: float,
                 sequential: bool) -> tuple[float | None, float | None]:
    """The relative adoption losses t that the stratified score test at theta = 1 - t does not reject at
    alpha, on either side: the decision's confidence sequence (one look: interval) of the loss. Each end is
    where log p - log alpha crosses zero (stats.crossing: ~10 tests where bisection to 1e-12 takes 42)."""
    log_alpha = math.log(alpha)

    def above_alpha(t: float, harm: bool) -> float:  # <= 0 where the test at theta = 1 - t rejects
        d, var = stats.stratified_ratio_score(strata, 1 - t)
        if not (math.isfinite(d) and math.isfinite(var)) or var <= 0:
            return math.inf
        p = stats.z_p_value((-d if harm else d) / math.sqrt(var), var, tau, sequential)
        return math.log(max(p, 1e-300)) - log_alpha if math.isfinite(p) else math.inf

    lo_end, hi_end = -1.0, 1.0 - 1e-9
    lo = stats.crossing(lambda t: above_alpha(t, True), lo_end, hi_end) if above_alpha(lo_end, True) <= 0 else None
    hi = -stats.crossing(lambda t: above_alpha(-t, False), -hi_end, -lo_end) \
        if above_alpha(hi_end, False) <= 0 else None
    return lo, hi


_unmeasured = [g for g in GATE_NAMES if not callable(getattr(_Measure, g, None))]
assert not _unmeasured, f"gates of the registry without a measurement in gate/evaluate.py: {_unmeasured}"


def _twice_the_tolerance(p0: float, harm_above: bool) -> float | None:
    """The rate a one-sample rate gate's devices_to_detect is sized for: a ceiling p0 doubled, or a floor
    p0 with twice the shortfall from 1 it allows (detected share 0.90: 0.80); None outside (0, 1)."""
    p1 = 2 * p0 if harm_above else 2 * p0 - 1
    return p1 if 0 < p1 < 1 else None


def _rows(effective: int | None, design_effect: float) -> int | None:
    return None if effective is None else math.ceil(effective * design_effect)


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
                  holdback_share: float | None = None, from_events: bool = False) -> GateResult:
    """The release's gate result over the whole days before as_of (pipeline/gate/window.py). holdback_share:
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
    window = gate_window(as_of, config)
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
    figures = _Figures(counts(con, params, config),
                       quantiles.segment_quantiles(con, params, config), sqlfiles.dicts(con, WEAK_SQL, params), error)
    device_days = {_level_key(r): r for r in day_counts(con, params, config)}
    error_days: dict[tuple, dict[str, int]] = {}
    for r in sqlfiles.dicts(con, ERROR_DAYS_SQL, params):
        error_days.setdefault(_level_key(r), {})[r["error_code"]] = int(r["device_days"])
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
