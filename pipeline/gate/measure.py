"""Measuring, step 1 of the gate (evaluate.py): the SQL's figures found by side and level (Figures), and what
every gate family's measurement shares (Measure: the statistics settings, device-level ratios, the rate and z tests
with their intervals and sizing). One module per family of gates, each a part of evaluate's measurement:
budgets (p95 budgets, thermal, weak-network latency), quality (adoption against the cloud), rates (fallback,
failure detectability, the shares of device-days: kills and edge seconds; the release-wide gatekeepers) and
retention."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pipeline.common.config import Config
from pipeline.common.registry import BY_NAME
from pipeline.common.vocabulary import Side
from pipeline.gate import quantiles, stats
from pipeline.gate.decide import budget_split
from pipeline.gate.figures import TIER_LEVEL, ratio
from pipeline.gate.result import DETECT_POWER, GateCheck, Sizing, Test
from pipeline.warehouse import sketch

QUANTILES_SQL = quantiles.HISTOGRAMS_SQL
WEAK_SQL = "gate/weak_latency"
RETENTION_SQL = "gate/retention"
LEVEL_NAMES = {0: "segment", 1: "task x tier (all buckets)", 2: "task x bucket (all tiers)", 3: "task",
               7: "release"}
P95 = quantiles.P95


def level_key(row: dict[str, Any]) -> tuple:
    level = row["level"]
    return {0: (row["task"], row["device_tier"], row["network_bucket"]), 1: (row["task"], row["device_tier"]),
            2: (row["task"], "*", row["network_bucket"]), 3: (row["task"],), TIER_LEVEL: tier_key(row["device_tier"]),
            7: ()}[level]


def tier_key(tier: str) -> tuple[str, str, str]:
    """The level key of a device tier's device-days (sql/gate/device_days.sql's TIER_LEVEL)."""
    return "*", tier, "*"


def segment_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["task"], row["device_tier"], row["network_bucket"]


def finite(*values: Any) -> bool:
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


def shown_or_open(shown: Callable[[float], float], x: float) -> float | None:
    """A bound on the shown scale; None (open) where it is past what a float holds (a p95 of e^800 ms)."""
    try:
        value = shown(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def twice_the_tolerance(p0: float, harm_above: bool) -> float | None:
    """The rate a one-sample rate gate's devices_to_detect is sized for: a ceiling p0 doubled, or a floor
    p0 with twice the shortfall from 1 it allows (detected share 0.90: 0.80); None outside (0, 1)."""
    p1 = 2 * p0 if harm_above else 2 * p0 - 1
    return p1 if 0 < p1 < 1 else None


def rows_with_design_effect(effective: int | None, design_effect: float) -> int | None:
    return None if effective is None else math.ceil(effective * design_effect)


class Figures:
    """The SQL's rows, found by side and level; quantile and weak-network figures merged in."""

    def __init__(self, counts: list[dict[str, Any]], quantile_rows: list[dict[str, Any]], weak: list[dict[str, Any]],
                 relative_error: float):
        self.relative_error = relative_error  # the histograms', folded into every quantile interval
        self.by = {(r["side"], level_key(r)): r for r in counts}
        for q in quantile_rows:
            row = self.by[(q["side"], level_key(q))]
            for name in quantiles.FIGURES:
                row[f"{name}_p95"], row[f"{name}_grid"] = q[f"{name}_p95"], q[f"{name}_grid"]
        self.weak = {(w["side"], level_key(w)): w for w in weak}

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


class Measure:
    """What the measurement of every gate family shares; evaluate._Measure is all the families together."""

    def __init__(self, figures: Figures, device_days: dict[tuple, dict[str, Any]],
                 error_days: dict[tuple, dict[str, int]], returning: dict[tuple, dict[str, Any]] | None,
                 config: Config):
        self.f = figures
        self.returning = returning  # retention.sql by (side, (task, tier) or ()); None: requests are assigned
        self.device_days = device_days  # by level key (level_key): a segment's, the release's ()
        self.error_days = error_days  # by level key: error_code -> device-days with it
        self.config = config
        self.sequential = config.statistics.method == "sequential"
        self.conf = config.statistics.confidence
        self.split = budget_split(config)
        self.by_device = config.statistics.estimand != "requests"  # quality compares devices whole
        self.pools: dict[tuple, GateCheck] = {}  # quality, per task x tier
        self.retention_pools: dict[tuple, GateCheck] = {}  # retention, per task x tier

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
        p1 = twice_the_tolerance(p0, harm_above)
        if not safe and name == check.main_test and p1 is not None:
            check.sizing = Sizing(name, lambda a: rows_with_design_effect(stats.rate_units_needed(
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
                return (shown_or_open(shown, harm - half), shown_or_open(shown, harm + half)) \
                    if math.isfinite(half) else (None, None)

            check.bounds = bounds
            check.interval_method = ("mixture SPRT confidence sequence" if self.sequential else "one-look z interval") \
                + ": the values no test at this alpha rejects"

    def _interval(self, grid: Any, n: float) -> tuple[float | None, float | None] | None:
        """The p95's fixed-sample interval from order statistics (for reading), widened by the sketch's error."""
        return self._widened(stats.quantile_interval(grid, n, P95, self.conf))

    def _widened(self, interval: tuple[float | None, float | None] | None) -> tuple[float | None, float | None] | None:
        """An interval of a p95, widened by the error of the histograms that gave the grid."""
        return sketch.widen(interval, self.f.relative_error)
