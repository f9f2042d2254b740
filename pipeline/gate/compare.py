"""Release against release: the candidate's edge beside the previous release's edge, per segment and, with
`by`, per device cell (`pipeline compare`, docs/drill-down.md).

Both releases are read over the same window (the candidate's gate window) from the rollup the gate reads, and
compared on every figure the drill-down splits (pipeline/gate/drill.py READS), with the statistics of the
gate's cloud comparisons: adoption as the relative loss of the candidate against the previous release
(the Farrington-Manning score test of candidate >= (1 - tolerance) x previous, device-level variances, the
quality_loss tolerance), every other figure as the difference of the two rates against a margin (the fallback
rate's max_excess_over_cloud; 0 for the others) by a z test of device-level (cluster-robust) variances. The
tests are one-sided (the candidate worse), anytime-valid when statistics.method is sequential, and one
Benjamini-Hochberg family at the gate's alpha over every comparison of the run.

model_id and app_version differ between two releases by construction, so cells match on soc, os_version,
mem_class_gb and npu_ready only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.common.config import Config
from pipeline.common.errors import UsageError
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.common.registry import BY_NAME, GateName
from pipeline.common.vocabulary import DEVICE_DIMENSIONS, Side
from pipeline.gate import drill, figures, source, stats

MATCHING = tuple(d for d in DEVICE_DIMENSIONS if d not in ("model_id", "app_version"))
MIN_TAU = figures.MIN_FALLBACK_TAU  # the mixing scale of a difference test with no margin of its own


@dataclass
class Comparison:
    segment: str
    cell: dict[str, str]  # {} for the whole segment
    gate: str
    what: str
    previous: float | None
    candidate: float | None
    change: float | None  # candidate - previous; for adoption the relative loss 1 - candidate / previous
    interval: tuple[float, float] | None
    margin: float
    p_value: float
    previous_p95: float | None = None  # the gate's p95 on each side (p95 budgets, whole segments)
    candidate_p95: float | None = None
    worse: bool = False
    devices: tuple[int, int] = (0, 0)  # previous, candidate

    def to_dict(self) -> dict[str, Any]:
        num = drill._num
        return {"segment": self.segment, "cell": self.cell or None, "gate": self.gate, "figure": self.what,
                "previous": num(self.previous), "candidate": num(self.candidate), "change": num(self.change),
                "interval": [num(x) for x in self.interval] if self.interval else None, "margin": self.margin,
                "p_value": num(self.p_value), "worse": self.worse,
                "previous_p95": num(self.previous_p95), "candidate_p95": num(self.candidate_p95),
                "devices": {"previous": self.devices[0], "candidate": self.devices[1]}}


@dataclass
class CompareResult:
    release: str
    against: str
    by: tuple[str, ...]
    alpha: float
    window: Any
    comparisons: list[Comparison]
    held_back_hours: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "release": self.release, "against": self.against,
                "by": list(self.by),
                "window": {"start": drill._iso(self.window.start), "end": drill._iso(self.window.end)},
                "multiplicity": {"method": "benjamini_hochberg", "alpha": self.alpha,
                                 "family": "every comparison of this run"},
                "comparisons": [c.to_dict() for c in self.comparisons]}


def parse_matching(text: str | None) -> tuple[str, ...]:
    """--by for compare: the dimensions two releases share (none by default: segments only)."""
    if not text:
        return ()
    dims = drill.parse_dimensions(text)
    refused = [d for d in dims if d not in MATCHING]
    if refused:
        raise UsageError(f"--by {text!r}: {', '.join(refused)} differs between two releases by construction; "
                         f"compare cells by {', '.join(MATCHING)}")
    return dims


def compare(con: Any, candidate: Any, previous: Any, config: Config, by: Sequence[str] = ()) -> CompareResult:
    """`candidate` and `previous` are gate results over the same window; the candidate's window is read."""
    window = candidate.window
    rows: dict[str, dict[str, dict]] = {}
    for side in (candidate.release, previous.release):
        params = window.params(side)
        with source.reading(con, config, window, side):  # a stale rollup: each release's window events
            tables = {"counts": figures.counts(con, params, config, by),
                      "days": figures.day_counts(con, params, config, by)}
        rows[side] = {t: {(r["task"], r["device_tier"], r["network_bucket"], r["cell"]): r for r in table
                          if r["level"] == 0 and r.get("side", Side.EDGE) == Side.EDGE}
                      for t, table in tables.items()}
    p95s = {rel.release: {(s.key, g): c.measured for s in rel.segments for g, c in s.checks.items()}
            for rel in (candidate, previous)}
    found = []
    for gate in drill.READS:
        table, k, n, harm_above = drill.reading(gate, config)
        shared = sorted(set(rows[candidate.release][table]) & set(rows[previous.release][table]))
        for key in shared:
            segment = "/".join(key[:3])
            c = _compare(gate, rows[candidate.release][table][key], rows[previous.release][table][key], k, n,
                         harm_above, segment, config)
            if c is None:
                continue
            c.cell = drill.cell_values(key[3], tuple(by))
            if BY_NAME[gate].kind == "p95_budget" and not by:
                c.previous_p95 = p95s[previous.release].get((segment, gate))
                c.candidate_p95 = p95s[candidate.release].get((segment, gate))
            found.append(c)
    alpha = 1 - config.statistics.confidence
    for i in stats.benjamini_hochberg({i: c.p_value for i, c in enumerate(found)}, alpha):
        found[i].worse = True
    found.sort(key=lambda c: (c.segment, tuple(c.cell.values()), list(drill.READS).index(c.gate)))
    return CompareResult(candidate.release, previous.release, tuple(by), alpha, window, found,
                         candidate.held_back_hours)


def _compare(gate: str, cand: dict, prev: dict, k: str, n: str, harm_above: bool, segment: str,
             config: Config) -> Comparison | None:
    md = config.min_devices
    a, b = figures.ratio(cand, k, n, md), figures.ratio(prev, k, n, md)
    if a.n <= 0 or b.n <= 0:
        return None
    sequential = config.statistics.method == "sequential"
    conf = config.statistics.confidence
    gates = config.gates_for(segment.split("/")[0])
    what = drill._what(gate).replace(" against the cell's cloud rows", " against the previous release")
    if gate == GateName.QUALITY_LOSS:  # the previous release's edge is the cell's baseline, as the cloud is in a drill
        tolerance = drill.threshold(gate, config, segment.split("/")[0])
        loss, interval = stats.stratified_relative_loss([stats.Stratum(a, b)], conf)
        p = drill.p_value(gate, cand, prev, k, n, harm_above, tolerance, config)
        return Comparison(segment, {}, gate, what, b.rate, a.rate, loss, interval, tolerance, p,
                          devices=(b.devices, a.devices))
    margin = gates.fallback_rate.max_excess_over_cloud if gate == GateName.FALLBACK_RATE else 0.0
    var = a.variance + b.variance
    if not math.isfinite(var) or var <= 0:
        var = a.binomial_variance * a.design_effect + b.binomial_variance * b.design_effect
    diff = a.rate - b.rate
    harm = (diff - margin) if harm_above else (-diff - margin)
    p = stats.z_p_value(harm / math.sqrt(var), var, max(margin, MIN_TAU), sequential) if var > 0 else math.nan
    half = stats.z_two_sided(conf) * math.sqrt(var) if var > 0 else math.nan
    interval = (max(-1.0, diff - half), min(1.0, diff + half)) if math.isfinite(half) else None
    return Comparison(segment, {}, gate, what, b.rate, a.rate, diff, interval, margin, p,
                      devices=(b.devices, a.devices))
