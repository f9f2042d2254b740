"""Device-level rates against a threshold: fallback (with its excess over the cloud), failure detectability, and the
shares of edge device-days (kills, judged per device tier, and daily edge seconds); the release-wide gatekeepers
that carry each rate gate's alpha."""

from __future__ import annotations

import math
from typing import Any

from pipeline.common.registry import GATES, GateName
from pipeline.common.vocabulary import Side, Status
from pipeline.gate import stats
from pipeline.gate.figures import DEVICE_DAYS_SQL, KILL_MIXTURE_WIDTH, MIN_FALLBACK_TAU
from pipeline.gate.measure import (
    P95,
    Measure,
    segment_key,
    tier_key,
)
from pipeline.gate.result import DETECT_POWER, GateCheck, Sizing


class Rates(Measure):
    """The measurements of the rates gates: a part of evaluate._Measure."""

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

    def daily_edge_seconds(self, row: dict, gates: Any) -> GateCheck:
        check = self._day_share(GateName.DAILY_EDGE_SECONDS, gates, segment_key(row), "over_cap",
                                "share of device-days over the cap")
        check.extra["cap_seconds"] = self.config.network.daily_edge_seconds_cap
        return check

    def kill_rate(self, row: dict, gates: Any) -> GateCheck:
        """Judged on the segment's device tier: a kill is the device's (memory pressure, the OS killing the app),
        whatever task or network it served, and Play's vitals judge it per device. Every segment of a tier
        reads the same device-days and is one hypothesis in the gate's family (`shared`), so a tier killed on
        3 % of its device-days fails in each of its segments, however its kills fall over tasks and buckets."""
        tier = row["device_tier"]
        check = self._kills(gates, tier_key(tier))
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
