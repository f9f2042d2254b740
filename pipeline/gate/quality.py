"""Adoption against the cloud baseline (quality_loss): the stratified Farrington-Manning score test, per task x tier
and release-wide."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pipeline.common.registry import GateName
from pipeline.common.vocabulary import Bucket, Side
from pipeline.gate import stats
from pipeline.gate.measure import (
    LEVEL_NAMES,
    Measure,
)
from pipeline.gate.result import DETECT_POWER, GateCheck, Sizing


class Quality(Measure):
    """The measurements of the quality gates: a part of evaluate._Measure."""

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
