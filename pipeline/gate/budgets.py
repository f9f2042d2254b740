"""The p95 budgets (peak and resident memory, inference duration, cold start, thermal with its throttled share) and
weak-network latency against the cloud's p95: the quantile gates."""

from __future__ import annotations

import math
from typing import Any

from pipeline.common.registry import BY_NAME, GateName
from pipeline.common.vocabulary import Bucket, Side
from pipeline.gate import stats
from pipeline.gate.figures import COUNTS_SQL
from pipeline.gate.measure import (
    LEVEL_NAMES,
    P95,
    QUANTILES_SQL,
    WEAK_SQL,
    Measure,
    finite,
)
from pipeline.gate.result import GateCheck

# Mixing scale tau of the weak-network latency test (stats.msprt_p_value): an edge p95 25 % slower than the
# cloud's, on the log scale.
WEAK_LATENCY_TAU = math.log(1.25)


class Budgets(Measure):
    """The measurements of the budgets gates: a part of evaluate._Measure."""

    def _budget(self, name: str, row: dict, gates: Any, min_rows: int | None = None) -> GateCheck:
        """A p95 budget: the share of values above the budget against 5 %, device-level."""
        check = self._new(name, gates)
        prefix = BY_NAME[name].figure
        n, p95 = row[f"{prefix}_n"], row.get(f"{prefix}_p95")
        check.rows, check.devices = n, row[f"{prefix}_n_devices"]
        check.sql = f"sql/{COUNTS_SQL}.sql, sql/{QUANTILES_SQL}.sql"
        needed = self.config.min_measured_rows if min_rows is None else min_rows
        if n < needed or not finite(p95):
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
        if weak is None or not finite(p95) or p95 <= 0:
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
