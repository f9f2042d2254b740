"""Estimate beside measurement: the post-mortem's table for a task with a `pipeline admit` candidate file.

For each dimension, the pre-launch estimate comes from admit.py's own assessment of the candidate (never
recomputed here), the field figure from sql/ledger/field.sql over the gate's window, on the candidate's target
tiers only (the tiers the estimate was made for):

    latency, planned       the candidate's latency_budget.total_s (else the gate's ceiling admit defaults to)
                           vs the field's p95 of total_ms on the target tiers
    latency, admit's model admit's total for a typical request on the slowest target tier vs that tier's p95
    peak / resident memory admit's peak and resident bytes (in MB of 2^20 bytes, the contract's MB) vs the p95
                           of peak_mem_mb / resident_mem_mb
    temperature rise       admit estimates thermal debt (energy, throttled duration), not heat: no estimate; the
                           field's p95 rise is judged against the gate's ceiling instead
    adoption loss          the candidate's quality_loss vs (cloud - edge) / cloud adoption on the target tiers

Every dimension is "higher is worse". ratio = field / estimate; a p95 row is flagged when the ratio exceeds
costs.estimate_flag_factor (1.25 by default), or, with no estimate, when the field's p95 is over the gate's
ceiling (p95s are compared as the gate compares them, point against budget). Adoption loss is a rate, so as
in the gate it is flagged only on evidence: the one-look Farrington-Manning score test rejects
"loss <= factor x estimate" (no positive estimate: "loss <= the gate's ceiling") at alpha = 1 - confidence.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipeline.common import package_data
from pipeline.common.config import Config
from pipeline.gate import stats
from pipeline.planning import admit
from pipeline.warehouse import sqlfiles

FIELD_SQL = "ledger/field"
MB = 2**20  # the contract's MB: peak_mem_ratio = peak_mem_mb / (mem_class_gb * 1024)


def candidates_dir() -> Path:
    """The shipped candidate files (gates/candidates/, package data beside the default gate config)."""
    return package_data.folder("gates") / "candidates"


def default_candidate(task: str) -> Path | None:
    """gates/candidates/<task>.yaml when it exists (task names that are not plain words are never paths)."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", task):
        return None
    path = candidates_dir() / f"{task}.yaml"
    return path if path.is_file() else None


@dataclass(frozen=True)
class DimensionEstimate:
    dimension: str
    unit: str
    estimate: float | None
    measured: float | None
    estimate_basis: str
    measured_basis: str
    ratio: float | None
    flagged: bool
    flag_reason: str

    def to_dict(self) -> dict[str, Any]:
        def num(v: float | None) -> float | None:
            return None if v is None else round(v, 6)
        return {"dimension": self.dimension, "unit": self.unit, "estimate": num(self.estimate),
                "measured": num(self.measured), "ratio": num(self.ratio), "flagged": self.flagged,
                "flag_reason": self.flag_reason,
                "basis": {"estimate": self.estimate_basis, "measured": self.measured_basis}}


@dataclass(frozen=True)
class EstimateTable:
    task: str
    candidate: str
    tiers: tuple[str, ...]
    factor: float
    rows: tuple[DimensionEstimate, ...]
    note: str = ""

    @property
    def flagged(self) -> list[str]:
        return [r.dimension for r in self.rows if r.flagged]

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "candidate": self.candidate, "target_tiers": list(self.tiers),
                "flag_factor": self.factor, "flagged": self.flagged, "note": self.note,
                "rows": [r.to_dict() for r in self.rows]}

    def __str__(self) -> str:
        head = (f"Estimate beside measurement: {self.task} ({self.candidate}; target tiers {', '.join(self.tiers)}; "
                f"flag: field / estimate > {self.factor:g})")
        if not self.rows:
            return f"{head}\n  {self.note}"
        width = max(len(r.dimension) for r in self.rows)
        lines = [head, f"  {'dimension':<{width}}  {'estimate':>14}  {'field':>14}  {'ratio':>6}  flag"]
        for r in self.rows:
            ratio = "–" if r.ratio is None else f"{r.ratio:.2f}"
            lines.append(f"  {r.dimension:<{width}}  {fmt(r.estimate, r.unit):>14}  {fmt(r.measured, r.unit):>14}  "
                         f"{ratio:>6}  {'FLAG' if r.flagged else ''}".rstrip())
        lines.append("  basis:")
        for r in self.rows:
            lines.append(f"    {r.dimension}: estimate = {r.estimate_basis}; field = {r.measured_basis}"
                         + (f"; flagged: {r.flag_reason}" if r.flagged else ""))
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "not estimated" if unit else "–"
    if unit == "share":
        return f"{100 * v:.1f} %"
    if unit == "°C":
        return f"{v:+.1f} °C"
    return f"{v:,.0f} {unit}"


def _dimension(name: str, unit: str, estimate: float | None, measured: float | None, estimate_basis: str,
               measured_basis: str, factor: float, gate_limit: float | None = None,
               gate_label: str = "") -> DimensionEstimate:
    ratio = measured / estimate if estimate is not None and estimate > 0 and measured is not None else None
    flagged, reason = False, ""
    if ratio is not None and ratio > factor:
        flagged, reason = True, f"the field is {ratio:.2f} x the estimate (> {factor:g})"
    elif ratio is None and measured is not None and gate_limit is not None and measured > gate_limit:
        flagged, reason = True, f"no positive estimate, and the field is over {gate_label}"
    return DimensionEstimate(name, unit, estimate, measured, estimate_basis, measured_basis, ratio, flagged, reason)


def _field(con: duckdb.DuckDBPyConnection, params: dict[str, Any], task: str,
           tiers: list[str]) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    rows = sqlfiles.dicts(con, FIELD_SQL, {**params, "task": task, "tiers": tiers})
    overall = next((r for r in rows if r["level"] == 1), None)
    return overall, {r["device_tier"]: r for r in rows if r["level"] == 0}


def compare(con: duckdb.DuckDBPyConnection, params: dict[str, Any], config: Config, candidate: admit.Candidate,
            source: str) -> EstimateTable:
    """The table for one candidate over the window in `params` (release, window_start, window_end)."""
    factor = config.costs.estimate_flag_factor
    a = admit.assess(candidate, config, source)
    tiers = list(dict.fromkeys(t.tier for t in candidate.targets))
    overall, per_tier = _field(con, params, candidate.task, tiers)
    if overall is None or not overall["edge_rows"]:
        return EstimateTable(candidate.task, source, tuple(tiers), factor, (),
                             f"no edge rows of task {candidate.task} on tiers {', '.join(tiers)} in the window")
    n = overall["edge_rows"]
    on = f"{n:,} edge rows of {candidate.task} on {', '.join(tiers)}"
    gates = config.gates_for(candidate.task)
    slowest = max(a.tiers, key=lambda t: t.latency.total_s)
    slow_tier = slowest.target.tier
    slow_field = per_tier.get(slow_tier, {})
    budget_basis = ("latency_budget.total_s of the candidate" if candidate.latency_budget.total_s is not None
                    else f"no latency_budget.total_s: the gate's inference_duration ceiling for {candidate.task}")
    m, th = a.memory, a.thermal
    energy = "unknown (no model.decode_power_w)" if th.energy_mwh is None else f"{th.energy_mwh:.1f} mWh per call"
    throttled = (f"{overall['throttled']:,} of {overall['throttled_known']:,} throttled"
                 if overall["throttled_known"] else "throttling not reported")
    rows = (
        _dimension("latency p95, planned", "ms", a.budget_total_s * 1000, overall["total_ms_p95"],
                   budget_basis, f"p95 of total_ms over {on}", factor),
        _dimension(f"latency p95, admit's model ({slow_tier})", "ms", slowest.latency.total_s * 1000,
                   slow_field.get("total_ms_p95"),
                   f"admit: a typical request ({candidate.prompt_tokens} + {candidate.output_tokens} tokens) on "
                   f"{slow_tier}, the slowest target tier",
                   f"p95 of total_ms over {slow_field.get('edge_rows', 0):,} edge rows of {candidate.task} on "
                   f"{slow_tier}", factor),
        _dimension("peak memory p95", "MB", m.peak_bytes / MB, overall["peak_mem_mb_p95"],
                   "admit: weights + KV cache + runtime", f"p95 of peak_mem_mb over {on}", factor),
        _dimension("resident memory p95", "MB", m.resident_bytes / MB, overall["resident_mem_mb_p95"],
                   "admit: weights + runtime", f"p95 of resident_mem_mb over {on}", factor),
        _dimension("temperature rise p95", "°C", None, overall["temp_rise_c_p95"],
                   f"admit estimates thermal debt, not heat: {energy}, {th.throttled_total_s:.1f} s when throttled "
                   f"on {a.thermal_tier.tier}",
                   f"p95 of temp_end_c - temp_start_c over {on}; {throttled}", factor,
                   gates.thermal.max_p95_rise_c, f"the gate's p95 rise ceiling of {gates.thermal.max_p95_rise_c:g} °C"),
        _quality(candidate, overall, tiers, config),
    )
    return EstimateTable(candidate.task, source, tuple(tiers), factor, rows)


def _quality(candidate: admit.Candidate, field: dict[str, Any], tiers: list[str], config: Config) -> DimensionEstimate:
    """Adoption is a rate: flagged only on evidence, by the gate's one-look Farrington-Manning score test
    of 'loss <= factor x estimate' (or <= the gate's ceiling without a positive estimate) at alpha. The
    ledger reads release-level counts without device sums, so rows count as independent here: a flag
    is a pointer to the gate's device-level verdict, not a verdict of its own."""
    name, factor = "adoption loss vs cloud", config.costs.estimate_flag_factor
    estimate = candidate.quality_loss
    basis = "quality_loss of the candidate" if estimate is not None else "no quality_loss declared"
    k_e, n_e, k_c, n_c = field["edge_adopted"], field["edge_rows"], field["cloud_adopted"], field["cloud_rows"]
    if not n_c or not k_c:
        return DimensionEstimate(name, "share", estimate, None, basis, f"no cloud rows of {candidate.task} on "
                         f"{', '.join(tiers)}", None, False, "")
    e_rate, c_rate = k_e / n_e, k_c / n_c
    loss = (c_rate - e_rate) / c_rate
    conf = config.statistics.confidence
    stratum = [stats.Stratum(_binomial(k_e, n_e), _binomial(k_c, n_c))]
    _, (lo, hi) = stats.stratified_relative_loss(stratum, conf)
    measured_basis = (f"(cloud {c_rate:.2%} of {n_c:,} - edge {e_rate:.2%} of {n_e:,}) / cloud adoption, "
                      f"{conf:.0%} interval [{lo:.2%}, {hi:.2%}]")
    ceiling = config.gates_for(candidate.task).quality_loss.max_relative_loss
    positive = estimate is not None and estimate > 0
    tolerance = factor * estimate if positive else ceiling
    d, var = stats.stratified_ratio_score(stratum, 1 - tolerance)
    p = stats.normal_sf(-d / math.sqrt(var)) if var > 0 else (0.0 if d < 0 else 1.0)
    flagged = p < 1 - conf
    reason, p_text = "", "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
    if flagged:
        reason = (f"the field's loss is above {factor:g} x the estimate ({tolerance:.2%}), {p_text}" if positive
                  else f"no positive estimate, and the field's loss is above the gate's {ceiling:.0%}, {p_text}")
    return DimensionEstimate(name, "share", estimate, loss, basis, measured_basis,
                             loss / estimate if positive else None, flagged, reason)


def estimate_tables(con: duckdb.DuckDBPyConnection, params: dict[str, Any], config: Config, tasks: list[str],
                    candidates: list[Path] | None = None) -> list[EstimateTable]:
    """One table per candidate: the given files, else gates/candidates/<task>.yaml of each task in `tasks`."""
    if candidates:
        paths = [Path(p) for p in candidates]
    else:
        paths = [p for p in (default_candidate(t) for t in tasks) if p is not None]
    tables = []
    for path in paths:
        candidate = admit.load_candidate(path)
        tables.append(compare(con, params, config, candidate, _shown(path)))
    return tables


def _shown(path: Path) -> str:
    """A shipped candidate as gates/candidates/NAME, any other as given."""
    try:
        return str(Path("gates") / "candidates" / path.resolve().relative_to(candidates_dir().resolve()))
    except ValueError:
        return str(path)


def _binomial(k: int, n: int) -> stats.DeviceRatio:
    p = k / n if n else 0.0
    return stats.DeviceRatio(n, n, k, p * (1 - p) / n if n else math.nan)
