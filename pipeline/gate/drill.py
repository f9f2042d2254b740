"""Drill-down: which device-matrix cells (soc x os_version x mem_class_gb x npu_ready x model_id x app_version)
carry a segment's failure (`pipeline drill`, docs/drill-down.md).

Each (segment, gate) is split into cells by the chosen dimensions, from the same per-device sums the gate reads
(sql/gate/segment_counts.sql and device_days.sql with `by`), so a cell's figure is the gate's own figure on the
cell's devices: the share of values above the p95 budget, the fallback rate, the detected share, the share of
device-days with a kill, the relative adoption loss against the cloud rows of the same cell.

- **Excess**: what a cell has beyond what the threshold allows (rows above the budget past 5 % of its values,
  fallbacks past the ceiling's share, kill days past 1 %, adoptions short of (1 - tolerance) x the cell's cloud
  rate). A cell's share of the excess is its positive excess over the sum of the positive ones: the explanatory
  power of Adtributor (Bhagwan et al., NSDI 2014) on counts that add up.
- **Flags**: each cell is tested on its own (the gate's test of harm on the cell's device-adjusted counts), and
  the cells of the whole drill (every segment, gate and cell it looks at) are one Benjamini-Hochberg (1995)
  family at the gate's alpha. A drill-down is a search: a false lead costs an engineer a look, not a rollback,
  so it controls the share of false leads among the cells flagged (FDR) and keeps its power as the matrix grows;
  with no real failure anywhere that is the chance of any false flag (FWER), so a healthy release flags none
  at least 95 % of the time.
- **Small cells**: a cell with fewer than min_devices edge devices is pooled into "other". A null is a value of
  its own (a missing field is a lead too), never merged with another value: a large enough cell with a null
  is listed as such.
- **The one-line answer**: start from the cell with the largest excess and name the dimensions whose other
  values (its siblings, pooled: same values elsewhere) have, at the 95 % bound of their device-adjusted counts,
  less than half its excess per count; the line gives the share of the excess in the cells that match those
  values, and calls the failure spread when that is less than half of it.
- **Dimensions ranked**: by how much more of the excess than of the rows their top value holds (its share of
  the excess minus its share of the rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.common.config import Config
from pipeline.common.errors import UsageError
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.common.registry import BY_NAME, GateName, label
from pipeline.common.vocabulary import DEVICE_DIMENSIONS, Side, Status, Verdict
from pipeline.gate import figures, quantiles, source, stats

NULL = "(null)"  # the SQL's mark for a null value in a cell
OTHER = "other"
SEPARATOR = "\x1f"  # chr(31) in the SQL
NAMED_SHARE = 0.5  # the one-line answer names a culprit only when it holds at least this share of the excess
SIBLING_RATIO = 0.5  # a dimension is named when the cell's siblings have less than this share of its excess per row
# the contract's dimensions as Google Play's Reporting API names the ones it has (vitals per device slice)
PLAY_NAMES = {"soc": "deviceSocModel", "mem_class_gb": "deviceRamBucket", "os_version": "apiLevel"}
OVER_TIER = (GateName.KILL_RATE,)  # judged over the segment's device tier (evaluate._Measure.kill_rate): split there
# how the drill reads each gate it can split: (table, k, n, harm above the threshold)
READS: dict[str, tuple[str, str, str, bool]] = {
    GateName.PEAK_MEMORY: ("counts", "peak_over", "peak_n", True),
    GateName.RESIDENT_MEMORY: ("counts", "resident_over", "resident_n", True),
    GateName.INFERENCE_DURATION: ("counts", "total_over", "total_n", True),
    GateName.COLD_START: ("counts", "cold_over", "cold_n", True),
    GateName.THERMAL: ("counts", "rise_over", "rise_n", True),
    GateName.KILL_RATE: ("days", "kill_days", "days", True),
    GateName.DAILY_EDGE_SECONDS: ("days", "over_cap", "days", True),
    GateName.FAILURE_DETECTABILITY: ("counts", "detected", "failures", False),
    GateName.FALLBACK_RATE: ("counts", "fallbacks", "rows", True),
    GateName.QUALITY_LOSS: ("counts", "adopted", "rows", False),
}


def reading(gate: str, config: Config) -> tuple[str, str, str, bool]:
    """READS[gate], with quality's counts as the estimand has them (devices compare their online rows)."""
    table, k, n, harm_above = READS[gate]
    if gate == GateName.QUALITY_LOSS and config.statistics.estimand != "requests":
        k, n = "online_adopted", "online_rows"
    return table, k, n, harm_above


def threshold(gate: str, config: Config, task: str) -> float:
    """What a cell's figure is held to: the share above a p95 budget (5 %), else the gate's setting for the task."""
    if BY_NAME[gate].kind == "p95_budget":
        return 1 - quantiles.P95
    return getattr(getattr(config.gates_for(task), gate), BY_NAME[gate].threshold_key)


def p_value(gate: str, row: dict[str, Any], cloud: dict[str, Any] | None, k: str, n: str, harm_above: bool,
            p0: float, config: Config, harm: bool = True) -> float:
    """One cell's p-value, by the gate's own test on its device-adjusted counts: of evidence that it breaks the
    threshold (harm), or that it is within it; quality against `cloud`, the cell's baseline rows."""
    sequential = config.statistics.method == "sequential"
    if gate == GateName.QUALITY_LOSS:
        if cloud is None:
            return math.nan
        e, c = figures.ratio(row, k, n, config.min_devices), figures.ratio(cloud, k, n, config.min_devices)
        if e.n <= 0 or c.n <= 0 or c.k <= 0:
            return math.nan
        d, var = stats.stratified_ratio_score([stats.Stratum(e, c)], 1 - p0)
        if not (var > 0 and math.isfinite(var)):
            return math.nan
        z = -d / math.sqrt(var) if harm else d / math.sqrt(var)
        return stats.z_p_value(z, var, p0 * c.rate * 2, sequential)
    r = figures.ratio(row, k, n, config.min_devices)
    if r.n_eff <= 0:
        return math.nan
    width = figures.KILL_MIXTURE_WIDTH if gate == GateName.KILL_RATE else None
    return stats.rate_p_value(r.k_eff, r.n_eff, p0, harm_above if harm else not harm_above, sequential, width)


NOT_SPLIT = {GateName.WEAK_NETWORK_LATENCY: "its figure is a ratio of p95s, and the rollup keeps no histogram "
                                            "per cell",
             GateName.RETENTION: "it is judged per task x tier on devices assigned whole, not per segment"}


@dataclass
class Cell:
    values: dict[str, str]  # dimension -> value (NULL for a null); {} for OTHER
    devices: int
    n: float  # raw count of the figure's denominator (rows, values, device-days)
    figure: float | None
    interval: tuple[float, float] | None
    excess: float
    cloud: float | None = None  # the cloud's rate in the cell (quality_loss)
    p_value: float = math.nan
    share: float = 0.0  # of the positive excess
    flagged: bool = False
    pooled: int = 0  # cells pooled into OTHER
    k: float = 0.0  # raw count of the figure's numerator
    k_eff: float = 0.0  # the figure's device-adjusted counts (rate gates)
    n_eff: float = 0.0

    @property
    def name(self) -> str:
        return self.label(tuple(self.values))

    def label(self, dimensions: tuple[str, ...]) -> str:
        """The cell's values of these dimensions, 'other' for the pool of small cells."""
        return OTHER if not self.values else " · ".join(self.values[d] for d in dimensions) or "(all)"

    def to_dict(self) -> dict[str, Any]:
        return {"cell": self.values or None, "other": not self.values, "pooled_cells": self.pooled,
                "devices": self.devices, "count": self.n, "figure": _num(self.figure),
                "interval": [_num(x) for x in self.interval] if self.interval else None,
                "cloud": _num(self.cloud), "excess": _num(self.excess), "share_of_excess": _num(self.share),
                "p_value": _num(self.p_value), "flagged": self.flagged}


@dataclass
class RankedDimension:
    name: str
    top_value: str
    share_of_excess: float
    share_of_count: float

    @property
    def concentration(self) -> float:
        return self.share_of_excess - self.share_of_count

    def to_dict(self) -> dict[str, Any]:
        return {"dimension": self.name, "top_value": self.top_value,  # to 1e-9: the same on every engine
                "share_of_excess": _exact(self.share_of_excess), "share_of_count": _exact(self.share_of_count),
                "concentration": _exact(self.concentration)}


@dataclass
class Drill:
    """One (segment, gate) split into cells."""

    segment: str
    gate: str
    status: str  # the gate's status on the segment
    what: str  # what the figure is
    threshold: float
    harm_above: bool
    excess: float  # the segment's own (sum over cells)
    cells: list[Cell]
    dimensions: list[RankedDimension] = field(default_factory=list)
    answer: str = ""
    named: dict[str, str] = field(default_factory=dict)  # the one-line answer's dimensions and values
    models: list[dict[str, Any]] = field(default_factory=list)  # kill_rate by soc against the per-model ceiling
    varying: tuple[str, ...] = ()  # the dimensions with more than one value in the segment (the others say nothing)
    raw: list[Cell] = field(default_factory=list)  # every cell as the SQL gives it, unmerged and untested
    named_share: float = 0.0

    @property
    def figure_max(self) -> bool:
        """The figure shown must stay at or below the threshold (a relative loss, not the adoption it tests)."""
        return self.harm_above or self.gate == GateName.QUALITY_LOSS

    def to_dict(self) -> dict[str, Any]:
        return {"segment": self.segment, "gate": self.gate, "status": self.status, "figure": self.what,
                "threshold": self.threshold, "fails": "above" if self.figure_max else "below",
                "excess": _num(self.excess), "answer": self.answer, "named": self.named,
                "named_share_of_excess": _num(self.named_share),
                "varying": list(self.varying), "dimensions": [d.to_dict() for d in self.dimensions],
                "cells": [c.to_dict() for c in self.cells],
                **({"per_model": [{**m, "figure": _num(m["figure"]), "p_value": _num(m["p_value"])}
                                  for m in self.models]} if self.models else {})}


@dataclass
class DrillResult:
    release: str
    by: tuple[str, ...]
    alpha: float
    window: Any
    drills: list[Drill]
    skipped: list[dict[str, str]]  # (segment, gate, why) not split
    held_back_hours: float = 0.0
    min_devices: int = 0  # cells with fewer edge devices are pooled into OTHER

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "release": self.release, "by": list(self.by),
                "play_names": {d: PLAY_NAMES[d] for d in self.by if d in PLAY_NAMES},
                "window": {"start": _iso(self.window.start), "end": _iso(self.window.end)},
                "multiplicity": {"method": "benjamini_hochberg", "alpha": self.alpha,
                                 "family": "every cell of this drill"},
                "drills": [d.to_dict() for d in self.drills], "not_split": self.skipped}


def parse_dimensions(text: str | None) -> tuple[str, ...]:
    """--by: comma-separated contract dimensions (all of them when not given), in the contract's order."""
    if not text:
        return DEVICE_DIMENSIONS
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in DEVICE_DIMENSIONS]
    if unknown or not names:
        raise UsageError(f"--by {text!r}: unknown dimension {', '.join(unknown) or '(none)'}; "
                         f"valid: {', '.join(DEVICE_DIMENSIONS)}")
    return tuple(d for d in DEVICE_DIMENSIONS if d in names)


def drill(con: Any, result: Any, config: Config, by: Sequence[str], segments: Sequence[str] = (),
          gates: Sequence[str] = (), every_segment: bool = False) -> DrillResult:
    """Split the (segment, gate) pairs of a gate result into cells. Default: the failed gates of the segments
    that roll back; `segments` / `every_segment` choose segments (then every splittable gate of a segment
    without a failed one); `gates` chooses gates."""
    for g in gates:
        if g not in BY_NAME:
            raise UsageError(f"--gate {g!r}: no such gate; gates: {', '.join(BY_NAME)}")
    chosen = _pairs(result, segments, gates, every_segment)
    skipped = [{"segment": s, "gate": g, "why": NOT_SPLIT[g]} for s, g in chosen if g in NOT_SPLIT]
    chosen = [(s, g) for s, g in chosen if g not in NOT_SPLIT]
    params = result.window.params(result.release)
    with source.reading(con, config, result.window, result.release):
        keys = sorted({segment for segment, _ in chosen})  # only their rows are read
        counts = figures.counts(con, params, config, by, keys) if any(READS[g][0] == "counts" for _, g in chosen) \
            else []
        days = figures.day_counts(con, params, config, by) if any(READS[g][0] == "days" for _, g in chosen) else []
    rows = {"counts": by_segment(counts), "days": by_segment(days), "tier_days": by_tier(days)}
    status = {(s.key, name): c.status for s in result.segments for name, c in s.checks.items()}
    drills = [_split(segment, gate, rows, tuple(by), config, status.get((segment, gate), ""))
              for segment, gate in chosen]
    alpha = 1 - config.statistics.confidence
    ps = {(i, j): c.p_value for i, d in enumerate(drills) for j, c in enumerate(d.cells)}
    for i, j in stats.benjamini_hochberg(ps, alpha):
        drills[i].cells[j].flagged = True
    return DrillResult(result.release, tuple(by), alpha, result.window, drills, skipped, result.held_back_hours,
                       config.min_devices)


def _pairs(result: Any, segments: Sequence[str], gates: Sequence[str], every_segment: bool) -> list[tuple[str, str]]:
    known = {s.key: s for s in result.segments}
    for key in segments:
        if key not in known:
            raise UsageError(f"--segment {key!r}: no such segment in release {result.release}; segments: "
                             f"{', '.join(known) or 'none'}")
    if segments:
        picked = [known[k] for k in segments]
    elif every_segment:
        picked = [s for s in result.segments if s.decision != Verdict.INSUFFICIENT_DATA]
    else:
        picked = [s for s in result.segments if s.decision == Verdict.ROLLBACK_TO_CLOUD]
    pairs = []
    for s in picked:
        names = list(gates) or s.failed_gates or [g for g in READS if s.checks[g].status != Status.NOT_APPLICABLE]
        pairs += [(s.key, g) for g in names]
    return pairs


def by_tier(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Tier-level rows (sql/gate/device_days.sql level 5) by ('edge', tier): what kill_rate is judged over."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["level"] == figures.TIER_LEVEL:
            out.setdefault((Side.EDGE, r["device_tier"]), []).append(r)
    return out


def by_segment(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Segment-level rows by (side or 'edge', segment key)."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["level"] == 0:
            out.setdefault((r.get("side", Side.EDGE), f"{r['task']}/{r['device_tier']}/{r['network_bucket']}"),
                           []).append(r)
    return out


def cell_values(cell: str, by: tuple[str, ...]) -> dict[str, str]:
    parts = cell.split(SEPARATOR) if by else []
    return {d: _shown(d, v) for d, v in zip(by, parts, strict=True)}


def _shown(dimension: str, value: str) -> str:
    if dimension == "mem_class_gb" and value.endswith(".0"):
        return value[:-2]
    return value


def _summed(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in rows:
        for k, v in r.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and k != "level":
                out[k] = (out.get(k) or 0) + v  # a NULL sum (no such rows) adds nothing
            else:
                out.setdefault(k, v)
    return out


def _split(segment: str, gate: str, rows: dict[str, Any], by: tuple[str, ...], config: Config,
           status: str) -> Drill:
    table, k, n, harm_above = reading(gate, config)
    limit = threshold(gate, config, segment.split("/")[0])
    quality = gate == GateName.QUALITY_LOSS
    cloud: dict[tuple, list[dict[str, Any]]] = {}
    if quality:
        for r in rows[table].get((Side.CLOUD, segment), []):
            cloud.setdefault(cloud_key(cell_values(r["cell"], by)), []).append(r)

    def measure(values: dict[str, str], members: list[dict[str, Any]], test: bool = True) -> Cell:
        keys = dict.fromkeys(cloud_key(cell_values(r["cell"], by)) for r in members)
        baseline = [c for ck in keys for c in cloud.get(ck, [])]
        return _measure(gate, values, _summed(members), baseline, k, n, limit, harm_above, config, test)

    edge_rows = rows[table].get((Side.EDGE, segment), []) if gate not in OVER_TIER else \
        rows["tier_days"].get((Side.EDGE, segment.split("/")[1]), [])
    unpooled = [measure(cell_values(r["cell"], by), [r], test=False) for r in edge_rows]  # for the ranking and answer
    varying = tuple(x for x in by if len({c.values[x] for c in unpooled}) > 1)
    ranked = [x for x in _rank(unpooled, by) if x.name in varying]
    d = Drill(segment, gate, status, _what(gate), limit, harm_above, 0.0, [], varying=varying, dimensions=ranked,
              raw=unpooled)
    d.named, d.named_share, d.answer = _answer(unpooled, [x.name for x in ranked], d, config)
    # small cells merge away their least telling dimension first: the answer's dimensions are the most telling
    order = list(d.named) + [x.name for x in ranked if x.name not in d.named]
    groups = _merged(edge_rows, by, order, n, config.min_devices)
    cells = [measure(values, members) for values, members in groups]
    if groups and not groups[-1][0]:
        cells[-1].pooled = len(groups[-1][1])
    d.cells = [c for c in cells if c.n > 0]
    positive = sum(max(0.0, c.excess) for c in d.cells)
    for c in d.cells:
        c.share = max(0.0, c.excess) / positive if positive > 0 else 0.0
    d.cells.sort(key=lambda c: (-_exact(max(0.0, c.excess)), -c.n, c.name))  # the excess first, then the biggest
    d.excess = sum(c.excess for c in d.cells)
    if gate == GateName.KILL_RATE and "soc" in by:
        d.models = _per_model(edge_rows, by, k, n, config)
        over = [m for m in d.models if m["over_ceiling"]]
        if over:
            d.answer += ("; " if d.answer else "") + "; ".join(
                f"soc = {m['soc']} killed on {m['figure']:.1%} of its device-days, over the per-model ceiling "
                f"{m['ceiling']:.0%}" for m in over)
    return d


def _per_model(rows: list[dict[str, Any]], by: tuple[str, ...], k: str, n: str,
               config: Config) -> list[dict[str, Any]]:
    """kill_rate per chip (soc: the phone model the contract carries) against gates.kill_rate.max_share_per_model,
    Play's per-phone-model line beside the tier's; a chip is over it when its test rejects, Benjamini-Hochberg over
    the chips at the drill's alpha. Worst first."""
    ceiling = config.gates.kill_rate.max_share_per_model
    by_soc: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_soc.setdefault(cell_values(r["cell"], by)["soc"], []).append(r)
    out = []
    for soc, members in by_soc.items():
        row = _summed(members)
        r = figures.ratio(row, k, n, config.min_devices)
        if r.n <= 0:
            continue
        out.append({"soc": soc, "devices": r.devices, "device_days": int(r.n), "figure": r.rate, "ceiling": ceiling,
                    "p_value": p_value(GateName.KILL_RATE, row, None, k, n, True, ceiling, config)})
    over = stats.benjamini_hochberg({m["soc"]: m["p_value"] for m in out}, 1 - config.statistics.confidence)
    for m in out:
        m["over_ceiling"] = m["soc"] in over
    return sorted(out, key=lambda m: (-m["figure"], m["soc"]))


def _merged(rows: list[dict[str, Any]], by: tuple[str, ...], ranked: list[str], n: str,
            min_devices: int) -> list[tuple[dict[str, str], list[dict[str, Any]]]]:
    """Cells of at least min_devices devices: a smaller cell is merged with its neighbours by leaving out its
    least telling dimension ('*'), then the next, ...; what is still too small at the end is pooled as OTHER
    ({} as values, last)."""
    out: list[tuple[dict[str, str], list[dict[str, Any]]]] = []
    pending = rows
    for keep in range(len(ranked), 0, -1):
        kept = ranked[:keep]
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for r in pending:
            values = cell_values(r["cell"], by)
            groups.setdefault(tuple(values[d] for d in kept), []).append(r)
        pending = []
        for key, members in groups.items():
            if sum(int(r.get(f"{n}_devices", r["devices"])) for r in members) >= min_devices:
                values = dict(zip(kept, key, strict=True))
                merged = {d: values.get(d, "*") for d in by}
                if len(members) == 1:
                    merged = cell_values(members[0]["cell"], by)
                out.append((merged, members))
            else:
                pending += members
    if not ranked:  # nothing varies: the segment is one cell
        out, pending = [({d: cell_values(r["cell"], by)[d] for d in by}, [r]) for r in rows], []
    if pending:
        out.append(({}, pending))
    return out


def cloud_key(values: dict[str, str]) -> tuple:
    """A cell's key on the cloud side: model_id is an edge attribute (null on cloud rows), so it is left out."""
    return tuple((d, v) for d, v in values.items() if d != "model_id")


def _measure(gate: str, values: dict[str, str], row: dict[str, Any], cloud_rows: list[dict[str, Any]], k: str,
             n: str, threshold: float, harm_above: bool, config: Config, test: bool = True) -> Cell:
    r = figures.ratio(row, k, n, config.min_devices)
    raw_n, raw_k = float(row[n] or 0), float(row[k] or 0)
    conf = config.statistics.confidence
    cell = Cell(values, int(row.get(f"{n}_devices", row["devices"])), raw_n, r.rate if r.n else None,
                stats.wilson(r.k_eff, r.n_eff, conf) if r.n_eff > 0 else None, 0.0,
                k=raw_k, k_eff=r.k_eff if r.n_eff > 0 else 0.0, n_eff=r.n_eff if r.n_eff > 0 else 0.0)
    if gate != GateName.QUALITY_LOSS:
        cell.excess = (raw_k - threshold * raw_n) if harm_above else (threshold * raw_n - raw_k)
        if test:
            cell.p_value = p_value(gate, row, None, k, n, harm_above, threshold, config)
        return cell
    base = _summed(cloud_rows) if cloud_rows else None
    c = figures.ratio(base, k, n, config.min_devices) if base else None
    if c is None or c.n <= 0 or c.k <= 0 or r.n <= 0:
        cell.figure, cell.interval = None, None
        return cell
    cloud_rate = float(base[k] or 0) / float(base[n] or 1)
    cell.cloud = c.rate
    cell.excess = (1 - threshold) * cloud_rate * raw_n - raw_k
    cell.figure, cell.interval = stats.stratified_relative_loss([stats.Stratum(r, c)], conf)
    if test:
        cell.p_value = p_value(gate, row, base, k, n, harm_above, threshold, config)
    return cell


def _what(gate: str) -> str:
    kind = BY_NAME[gate].kind
    if kind == "p95_budget":
        return "share of values above the p95 budget"
    return {GateName.KILL_RATE: "share of device-days with a kill",
            GateName.DAILY_EDGE_SECONDS: "share of device-days over the cap",
            GateName.FAILURE_DETECTABILITY: "detected share of failures",
            GateName.FALLBACK_RATE: "fallback rate",
            GateName.QUALITY_LOSS: "relative adoption loss against the cell's cloud rows"}[gate]


def _rank(cells: list[Cell], by: tuple[str, ...]) -> list[RankedDimension]:
    positive = sum(max(0.0, c.excess) for c in cells)
    total_n = sum(c.n for c in cells)
    if positive <= 0 or total_n <= 0:
        return []
    out = []
    for d in by:
        excess: dict[str, float] = {}
        count: dict[str, float] = {}
        for c in cells:
            v = c.values.get(d, NULL)
            excess[v] = excess.get(v, 0.0) + c.excess
            count[v] = count.get(v, 0.0) + c.n
        top = max(excess, key=lambda v: (_exact(excess[v]), v))
        spread = sum(max(0.0, x) for x in excess.values())  # 0 when the excess cancels out at this dimension
        out.append(RankedDimension(d, top, max(0.0, excess[top]) / spread if spread else 0.0, count[top] / total_n))
    return sorted(out, key=lambda x: (-_exact(x.concentration), by.index(x.name)))


def _answer(cells: list[Cell], ranked: list[str], d: Drill, config: Config) -> tuple[dict[str, str], float, str]:
    """The one-line answer: from the cell with the most excess, leave out each dimension (least telling first)
    unless the cells that differ from it only there (its siblings, over the dimensions still kept) have, at most
    (the 95 % bound on their device-adjusted counts), less than SIBLING_RATIO of its excess per count. Quality
    cells, whose figure is a comparison, use the siblings' point estimate and need min_devices devices."""
    what = f"{label(d.gate)} excess"
    positive = sum(max(0.0, c.excess) for c in cells)
    if positive <= 0:
        return {}, 0.0, f"no {what}: every cell is within the threshold"
    top = max(cells, key=lambda c: (_exact(c.excess), c.name))
    kept = list(ranked)

    def matching(dims: list[str]) -> list[Cell]:
        return [c for c in cells if all(c.values[x] == top.values[x] for x in dims)]

    def most_excess_per_count(group: list[Cell]) -> float:
        if d.gate == GateName.QUALITY_LOSS:
            n = sum(c.n for c in group)
            enough = n > 0 and sum(c.devices for c in group) >= config.min_devices
            return sum(c.excess for c in group) / n if enough else math.inf
        bounds = stats.wilson(sum(c.k_eff for c in group), sum(c.n_eff for c in group), config.statistics.confidence)
        if bounds is None:
            return math.inf
        return bounds[1] - d.threshold if d.harm_above else d.threshold - bounds[0]

    for x in reversed(ranked):
        rest = [y for y in kept if y != x]
        group = matching(kept)
        rate = sum(c.excess for c in group) / max(1.0, sum(c.n for c in group))
        siblings = [c for c in matching(rest) if c.values[x] != top.values[x]]
        if not siblings or most_excess_per_count(siblings) >= SIBLING_RATIO * rate:
            kept = rest
    if not kept:
        where = ", ".join(f"{x} = {top.values[x]}" for x in ranked) or "the segment"
        return {}, top.excess / positive, (f"the {what} is spread over the cells: the largest "
                                           f"({where}) holds {top.excess / positive:.0%} of it")
    named = {x: top.values[x] for x in ranked if x in kept}
    share = sum(max(0.0, c.excess) for c in matching(kept)) / positive
    parts = [f"{x} = {v}" for x, v in named.items()]
    said = parts[0] + (" with " + " and ".join(parts[1:]) if parts[1:] else "")
    if share < NAMED_SHARE:  # a description that leaves most of the failure out names no culprit
        return {}, share, f"the {what} is spread over the cells: the most of it one description holds is " \
                          f"{share:.0%}, in {said}"
    return named, share, f"{share:.0%} of the {what} is {said}"


def _exact(x: float) -> float:
    """A figure as an order compares it: rows summed in another order (DuckDB, Spark, another plan) differ in
    the last bits, and a tie must break the same way on every engine."""
    return round(x, 9)


def _num(v: Any) -> Any:
    return v if v is None or (isinstance(v, float) and math.isfinite(v)) or isinstance(v, int) else None


def _iso(t: Any) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")  # the window's times are UTC
