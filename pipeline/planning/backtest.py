"""`pipeline backtest`: the configured gate and rollout policy replayed night by night over stored
telemetry, to measure its operating characteristics on a team's own data (docs/backtest.md;
docs/how-the-gate-decides.md). Each run re-draws the random parts below (seeded), loads the variant into an in-memory
warehouse and judges it on each night, advancing the rollout states as the nightly job would:

- "as stored": the release itself (on a release you trust, every rollback is a false one);
- A/A, cloud split: the cloud devices split at random into two halves, one half playing the edge;
- A/A, edge split: the edge devices split at random, one half playing the cloud baseline;
  in both A/A variants only the gates that compare with the cloud are enforced, since the two
  halves are the same by construction and any rollback they cause is a false one;
- injected regressions on the edge rows of the release: an adoption loss (a relative share of
  adoptions becomes `abandoned`), a p95 slowdown (total_ms and ttft_ms times 1 + x), a memory
  growth (peak and resident memory times 1 + x), a fallback spike (+x of the edge rows become
  user fallbacks). Recall is the share of runs in which the injected gate rolled a segment back.

Devices are the unit everywhere: splits and subsamples pick whole devices, so the correlation of
one phone's requests is kept. `--segment-rows` subsamples devices until the median judged segment
has about that many edge rows on the last night.

Why one module: the variants, the injections and the night-by-night judging share one in-memory
warehouse and one seeded draw per run; apart, each part would need the others' state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.common import clock
from pipeline.common.config import Config
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.common.registry import CLOUD_COMPARISONS, GateName
from pipeline.common.vocabulary import Route, Status
from pipeline.gate import stats
from pipeline.gate.evaluate import evaluate_gate, require_release
from pipeline.gate.result import GateResult
from pipeline.rollout import state as rollout_state
from pipeline.warehouse import db, sqlfiles
from pipeline.warehouse.aggregate import budget_params, refresh_on, use_settings

USER_FALLBACK = "edited"


@dataclass(frozen=True)
class Injection:
    """A regression added to the edge rows: which gate it should trip, and how big. `apply` changes
    the rows (Arrow); `in_warehouse`, when set, changes them after loading (SQL)."""

    gate: str
    size: float
    label: str
    apply: Callable[[pa.Table, np.random.Generator, float], pa.Table]
    in_warehouse: str = ""  # the figure scale_to_budget.sql scales: 'total' | 'memory'


def _unchanged(t: pa.Table, rng: np.random.Generator, x: float) -> pa.Table:
    return t


def _adoption_loss(t: pa.Table, rng: np.random.Generator, x: float) -> pa.Table:
    edge = np.asarray(pc.not_equal(t["route"], Route.CLOUD.value))
    adopted = np.asarray(pc.equal(t["outcome"], "adopted"))
    lose = edge & adopted & (rng.random(t.num_rows) < x)
    return _set_where(t, "outcome", lose, "abandoned")


def _by_device(t: pa.Table, rng: np.random.Generator, p: float, concentration: float) -> np.ndarray:
    """Per row, the chance its device has: Beta(c p, c (1 - p)) per device around `p` (concentration 0: `p`
    for every device), so a regression hits some users much harder than others, as a bad chip would."""
    if concentration <= 0 or p <= 0 or p >= 1:
        return np.full(t.num_rows, p)
    from scipy.special import betaincinv

    return betaincinv(concentration * p, concentration * (1 - p), _device_uniforms(t, rng))


def _fallback_spike(t: pa.Table, rng: np.random.Generator, x: float, concentration: float = 0.0) -> pa.Table:
    """Edge fallbacks up by `x` of all edge rows (absolute), taken from the rows not already falling back;
    with a concentration, the extra share is drawn per device (_by_device)."""
    edge = np.asarray(pc.not_equal(t["route"], Route.CLOUD.value))
    fallback = np.asarray(pc.is_in(t["outcome"], pa.array(["edited", "regenerated", "undone"]))) | np.asarray(
        t["auto_fallback"])
    share = fallback[edge].mean() if edge.any() else 0.0
    p = min(1.0, x / max(1e-9, 1 - share))
    spike = edge & ~fallback & (rng.random(t.num_rows) < _by_device(t, rng, p, concentration))
    return _set_where(t, "outcome", spike, USER_FALLBACK)


def _silent_failures(t: pa.Table, rng: np.random.Generator, x: float, concentration: float) -> pa.Table:
    """Of the edge failures the app detected (auto_fallback, error_code), this share per device (on average)
    becomes silent: no automatic fallback, no error code, the user sees a failed answer."""
    edge = np.asarray(pc.not_equal(t["route"], Route.CLOUD.value))
    detected = np.asarray(t["auto_fallback"]) | np.asarray(pc.is_valid(t["error_code"]))
    silent = edge & detected & (rng.random(t.num_rows) < _by_device(t, rng, x, concentration))
    t = _set_where(t, "outcome", silent, "failed")
    t = t.set_column(t.schema.get_field_index("auto_fallback"), "auto_fallback",
                     pc.and_(t["auto_fallback"], pa.array(~silent)))
    codes = pc.if_else(pa.array(silent), pa.scalar(None, pa.string()), t["error_code"].combine_chunks())
    return t.set_column(t.schema.get_field_index("error_code"), "error_code", codes)


def _set_where(t: pa.Table, column: str, mask: np.ndarray, value: str) -> pa.Table:
    """`column` set to `value` on the rows of `mask`."""
    new = pc.if_else(pa.array(mask), pa.scalar(value), t[column].combine_chunks())
    return t.set_column(t.schema.get_field_index(column), column, new)


INJECTIONS: dict[str, tuple[str, str, Callable[[pa.Table, np.random.Generator, float], pa.Table], str]] = {
    # name: (gate it targets, label, how, figure scaled in the warehouse). latency and memory put each
    # segment's p95 at (1 + x) x its budget: a breach of that size, whatever the stored p95 was.
    "adoption": (GateName.QUALITY_LOSS, "adoption -{x:.0%} relative", _adoption_loss, ""),
    "latency": (GateName.INFERENCE_DURATION, "latency p95 at {y:.2f}x budget", _unchanged, "total"),
    "memory": (GateName.PEAK_MEMORY, "peak memory p95 at {y:.2f}x budget", _unchanged, "memory"),
    "fallback": (GateName.FALLBACK_RATE, "fallback +{x:.0%} of edge rows", _fallback_spike, ""),
}
DEFAULT_INJECTIONS = ("adoption=0.10", "latency=0.20", "memory=0.20", "fallback=0.10")


def parse_injection(spec: str) -> Injection:
    """`adoption=0.1`, `latency=0.25`, `memory=0.25`, `fallback=0.1`."""
    name, _, value = spec.partition("=")
    if name not in INJECTIONS:
        raise ValueError(f"--inject {spec!r}: unknown regression {name!r}; known: {', '.join(INJECTIONS)} "
                         "(e.g. --inject adoption=0.1)")
    try:
        x = float(value)
    except ValueError:
        raise ValueError(f"--inject {spec!r}: the size must be a number, e.g. {name}=0.1") from None
    if not 0 < x < (1 if name in ("adoption", "fallback") else 100):
        raise ValueError(f"--inject {spec!r}: the size must be > 0" + (" and < 1" if name in ("adoption", "fallback")
                                                                        else ""))
    gate, label, apply, figure = INJECTIONS[name]
    return Injection(gate, x, label.format(x=x, y=1 + x), apply, figure)


@dataclass
class VariantResult:
    name: str
    kind: str  # stored | aa | inject
    gate: str | None  # the injected gate
    runs: int = 0
    rolled_back: int = 0  # runs with a segment (or the release) rolled back by the last night
    caught: int = 0  # injections: runs in which the injected gate rolled a segment back
    first_nights: list[int] = field(default_factory=list)
    segment_recall: list[float] = field(default_factory=list)  # share of judged segments failing the gate, last night
    median_rows: list[int] = field(default_factory=list)
    gates: dict[str, int] = field(default_factory=dict)  # gate -> runs it rolled a segment back in

    @property
    def counted(self) -> int:
        return self.caught if self.kind == "inject" else self.rolled_back

    def to_dict(self, confidence: float) -> dict[str, Any]:
        lo, hi = stats.wilson(self.counted, self.runs, confidence) or (None, None)
        return {"variant": self.name, "kind": self.kind, "gate": self.gate, "runs": self.runs,
                "rolled_back": self.rolled_back, "caught": self.caught if self.kind == "inject" else None,
                "rate": self.counted / self.runs if self.runs else None, "interval_95": [lo, hi],
                "first_night_median": float(np.median(self.first_nights)) if self.first_nights else None,
                "segment_recall": float(np.mean(self.segment_recall)) if self.segment_recall else None,
                "median_segment_rows": int(np.median(self.median_rows)) if self.median_rows else None,
                "rolled_back_by_gate": dict(sorted(self.gates.items()))}


@dataclass
class BacktestResult:
    release: str
    first_night: datetime
    nights: int
    runs: int
    seed: int
    segment_rows: int | None
    config: Config
    variants: list[VariantResult]

    def to_dict(self) -> dict[str, Any]:
        c = self.config
        return {"schema_version": SCHEMA_VERSION, "release": self.release,
                "looks": [(self.first_night + timedelta(days=k)).strftime("%Y-%m-%d") for k in range(self.nights)],
                "runs": self.runs, "seed": self.seed, "segment_rows": self.segment_rows,
                **_settings(c),
                "variants": [v.to_dict(c.statistics.confidence) for v in self.variants]}

    def __str__(self) -> str:
        c = self.config
        conf = c.statistics.confidence
        last = self.first_night + timedelta(days=self.nights - 1)
        lines = [f"backtest {self.release}: {self.runs} runs x {self.nights} nightly looks "
                 f"({self.first_night:%Y-%m-%d} .. {last:%Y-%m-%d}), seed {self.seed}; {_settings_line(c)}",
                 "", f"{'variant':<52} {'rolled back / caught':>22} {'95% interval':>15} {'first night':>11} "
                     f"{'segments':>9} {'seg rows':>9}"]
        for v in self.variants:
            d = v.to_dict(conf)
            lo, hi = d["interval_95"]
            rate = f"{v.counted} of {v.runs} ({d['rate']:.0%})" if v.runs else "-"
            iv = f"{lo:.0%}-{hi:.0%}" if lo is not None else "-"
            first = f"{d['first_night_median']:g}" if d["first_night_median"] is not None else "-"
            recall = f"{d['segment_recall']:.0%}" if d["segment_recall"] is not None else "-"
            rows = f"{d['median_segment_rows']:,}" if d["median_segment_rows"] is not None else "-"
            lines.append(f"{v.name:<52} {rate:>22} {iv:>15} {first:>11} {recall:>9} {rows:>9}")
        lines += ["",
                  "rolled back: runs with a segment rolled back by the last night (a false rollback for as stored on a "
                  "trusted release and for A/A);",
                  "caught (injections): runs in which the injected gate rolled a segment back; first night: median "
                  "night of the first rollback;",
                  "segments: share of judged segments failing the injected gate on the last night; seg rows: median "
                  "edge rows per segment then."]
        return "\n".join(lines)


def _settings(c: Config) -> dict[str, Any]:
    """The statistics, rollout policy and config a backtest ran with (both JSON outputs)."""
    return {"statistics": {"method": c.statistics.method, "alpha": round(1 - c.statistics.confidence, 6),
                           "estimand": c.statistics.estimand},
            "policy": dataclasses.asdict(c.rollout), "config": {"path": c.source, "digest": c.digest}}


def _settings_line(c: Config) -> str:
    return (f"statistics {c.statistics.method}, estimand {c.statistics.estimand}, alpha "
            f"{1 - c.statistics.confidence:g} per evaluation; rollout: "
            f"roll back at {c.rollout.fail_looks} failing of the last {c.rollout.window_looks} looks")


@dataclass
class NightLook:
    night: int
    result: GateResult
    rolled_gates: set[str]  # gates behind segments rolled back after this look
    rolled: bool


def replay_nights(con: Any, release: str, config: Config, first_night: datetime, nights: int) -> list[NightLook]:
    """Judge `release` in `con` as of first_night, +1 day, ... and advance the rollout states."""
    states: dict[str, rollout_state.SegmentState] = {}
    out = []
    for k in range(nights):
        result = evaluate_gate(con, release, config, as_of=first_night + timedelta(days=k))
        for key, look in rollout_state.looks_of(result.to_dict()).items():
            states[key] = rollout_state.advance(states.get(key, rollout_state.SegmentState(key)), look, config.rollout)
        rolled = {k: s for k, s in states.items() if s.state in rollout_state.ROLLED}
        out.append(NightLook(k + 1, result, {g for s in rolled.values() for g in s.failed_gates}, bool(rolled)))
    return out


def load_scratch(table: pa.Table, config: Config, threads: int | None = None,
                 scale: dict[str, Any] | None = None) -> Any:
    """An in-memory warehouse of `table`, rolled up once for every night; `scale`: the bound values of
    backtest/scale_to_budget.sql, applied to the rows before the roll-up."""
    con = db.scratch(threads)
    con.register("variant_rows", table)
    con.execute("INSERT INTO events BY NAME SELECT * FROM variant_rows")
    con.unregister("variant_rows")
    use_settings(con, config)
    if scale is not None:
        sqlfiles.run(con, "backtest/scale_to_budget", scale)
    refresh_on(con, config, True, clock.now())  # the rollups the gate reads
    return con


def _device_uniforms(table: pa.Table, rng: np.random.Generator, normal: bool = False) -> np.ndarray:
    """One draw per device (uniform, or standard normal), spread to its rows: splits and subsamples
    keep devices whole."""
    codes = pc.dictionary_encode(table["device_id"]).combine_chunks()
    count = len(codes.dictionary)
    draws = rng.standard_normal(count) if normal else rng.random(count)
    return draws[np.asarray(codes.indices)]


def _comparisons_only(config: Config) -> Config:
    """The gates that compare with the cloud stay as configured; the others only observe."""
    def only(gates: Any) -> Any:
        return dataclasses.replace(gates, **{g: dataclasses.replace(getattr(gates, g), mode="observe")
                                             for g in gates.names() if g not in CLOUD_COMPARISONS})
    return dataclasses.replace(config, gates=only(config.gates),
                               task_overrides={t: only(g) for t, g in (config.task_overrides or {}).items()})


def _median_segment_rows(result: GateResult) -> int:
    """Median edge rows over the release's segments (judged or not): the size a sweep is named by."""
    rows = sorted(s.rows for s in result.segments)
    return rows[len(rows) // 2] if rows else 0


def backtest(con: Any, release: str, config: Config, as_of: datetime, nights: int | None = None,
             runs: int = 20, segment_rows: int | None = None, injections: list[Injection] | None = None,
             seed: int = 0, progress: Callable[[int, int, str], None] | None = None) -> BacktestResult:
    """`progress(done, total, label)`: called after each replay (a run of one variant)."""
    require_release(con, release)
    window_start = as_of - timedelta(days=config.window_days)
    source = sqlfiles.arrow(con, "backtest/source",  # from DuckDB or Spark; the replay runs in DuckDB scratch
                            {"release": release, "window_start": window_start, "window_end": as_of})
    first_day = datetime.combine(pc.min(source["event_time"]).as_py().date(), datetime.min.time())
    available = max(1, math.ceil((as_of - first_day) / timedelta(days=1)))
    nights = min(nights or available, available)
    first_night = as_of - timedelta(days=nights - 1)
    injections = injections if injections is not None else [parse_injection(s) for s in DEFAULT_INJECTIONS]
    fraction = _subsample_fraction(source, release, config, as_of, segment_rows) if segment_rows else 1.0

    aa_config = _comparisons_only(config)
    variants: list[tuple[VariantResult, Config, Injection | None, Callable]] = [
        (VariantResult("as stored", "stored", None), config, None, lambda t, rng: t),
        (VariantResult("A/A, cloud devices split", "aa", None), aa_config, None, _aa_cloud),
        (VariantResult("A/A, edge devices split", "aa", None), aa_config, None, _aa_edge),
    ]
    for inj in injections:
        variants.append((VariantResult(f"{inj.label} ({inj.gate})", "inject", inj.gate), config, inj,
                         lambda t, rng, inj=inj: inj.apply(t, rng, inj.size)))
    stored_looks: list[NightLook] | None = None  # the whole release as stored replays the same every run
    for run in range(runs):
        for i, (result, cfg, inj, make) in enumerate(variants):
            if result.kind == "stored" and fraction >= 1 and stored_looks is not None:
                _count(result, stored_looks)
                continue
            rng = np.random.default_rng([seed, run, i])
            table = source
            if fraction < 1:
                table = table.filter(pa.array(_device_uniforms(table, rng) < fraction))
            scale = ({"factor": 1 + inj.size, "figure": inj.in_warehouse, **_budgets(cfg)}
                     if inj and inj.in_warehouse else None)
            scratch = load_scratch(make(table, rng), cfg, scale=scale)
            looks = replay_nights(scratch, release, cfg, first_night, nights)
            if result.kind == "stored":
                stored_looks = looks
            _count(result, looks)
            if progress:
                progress(run * len(variants) + i + 1, runs * len(variants), f"run {run + 1}: {result.name}")
    return BacktestResult(release, first_night, nights, runs, seed, segment_rows, config,
                          [v for v, *_ in variants])


def _budgets(config: Config) -> dict[str, Any]:
    wanted = sqlfiles.param_names(sqlfiles.sql_file("backtest/scale_to_budget"))
    return {k: v for k, v in budget_params(config).items() if k in wanted}


def _aa_cloud(t: pa.Table, rng: np.random.Generator) -> pa.Table:
    t = t.filter(pc.equal(t["route"], Route.CLOUD.value))
    return _set_where(t, "route", _device_uniforms(t, rng) < 0.5, Route.EDGE.value)


def _aa_edge(t: pa.Table, rng: np.random.Generator) -> pa.Table:
    t = t.filter(pc.not_equal(t["route"], Route.CLOUD.value))
    return _set_where(t, "route", _device_uniforms(t, rng) < 0.5, Route.CLOUD.value)


def _count(v: VariantResult, looks: list[NightLook]) -> None:
    v.runs += 1
    last = looks[-1]
    v.median_rows.append(_median_segment_rows(last.result))
    if last.rolled:
        v.rolled_back += 1
    for g in set().union(*(look.rolled_gates for look in looks)):
        v.gates[g] = v.gates.get(g, 0) + 1
    hit = [look.night for look in looks if (v.gate in look.rolled_gates if v.gate else look.rolled)]
    if v.kind == "inject":
        judged = last.result.judged
        if judged:
            v.segment_recall.append(sum(v.gate in s.failed_gates for s in judged) / len(judged))
        if hit:
            v.caught += 1
    if hit:
        v.first_nights.append(hit[0])


def _subsample_fraction(source: pa.Table, release: str, config: Config, as_of: datetime, target: int) -> float:
    """The share of devices to keep so the median judged segment has about `target` edge rows."""
    result = evaluate_gate(load_scratch(source, config), release, config, as_of=as_of)
    rows = sorted(s.rows for s in result.segments if s.rows > 0)
    median = rows[len(rows) // 2] if rows else 0
    return min(1.0, target / median) if median else 1.0


# ------------------------------------------------------------------ simulated releases (backtest --simulated)


@dataclass(frozen=True)
class Sweep:
    """A simulated release rolled out over 14 nights, repeated over seeds: the operating characteristics
    of docs/operating-characteristics.md. p95_factor: edge latency redrawn so that every segment's true p95 is this x
    its budget (device-correlated), and the share of segment looks failing inference_duration is counted."""

    name: str
    scenario: str
    rows: int
    clustered: bool = True
    loss: float = 0.0
    p95_factor: float | None = None
    population: Any = None  # a simulate.Population of the heterogeneity family (instead of `clustered`)
    fallback_spike: float = 0.0  # edge fallbacks up by this share of edge rows, drawn per device
    silent_share: float = 0.0  # this share of detected edge failures made silent, drawn per device
    edge_device_loss: float = 0.0  # the telemetry of this share of edge devices (the most killed first) lost
    edge_churn: float = 0.0  # this share of edge devices stop after their first day
    assignment_unit: str = ""  # the config's assignment.unit for this sweep ("" = as configured)


def _holdback_by_device() -> Any:
    from pipeline.planning.simulate import CLUSTERED

    return dataclasses.replace(CLUSTERED, holdback_share=0.2)


HOLDBACK_BY_DEVICE = _holdback_by_device()  # the device-clustered population, its hold-back by whole devices
SWEEPS: tuple[Sweep, ...] = (
    Sweep("A/A, independent rows", "aa", 56_000, clustered=False),
    Sweep("A/A, device-clustered", "aa", 140_000),
    Sweep("adoption loss at the tolerance (3 %)", "aa", 140_000, loss=0.03),
    Sweep("adoption loss 10 %, ~1,000 rows/segment", "aa", 140_000, loss=0.10),
    Sweep("adoption loss 15 %, ~400 rows/segment", "aa", 56_000, loss=0.15),
    Sweep("adoption loss 10 %, ~140 rows/segment", "aa", 20_000, loss=0.10),  # where sequential costs power
    Sweep("latency p95 at the budget, independent values", "healthy", 70_000, clustered=False, p95_factor=1.0),
    Sweep("latency p95 at 1.2 x the budget, independent values", "healthy", 70_000, clustered=False,
          p95_factor=1.2),
    Sweep("latency p95 at the budget, device-clustered", "healthy", 70_000, p95_factor=1.0),
    Sweep("latency p95 at 1.2 x the budget, device-clustered", "healthy", 70_000, p95_factor=1.2),
    Sweep("low-tier kills on ~3 % of device-days", "low_tier_kills", 140_000),
    Sweep("A/A, hold-back by device", "aa", 140_000, population=HOLDBACK_BY_DEVICE, assignment_unit="device"),
    Sweep("10 % of edge devices' telemetry lost, by device", "aa", 140_000, population=HOLDBACK_BY_DEVICE,
          edge_device_loss=0.10, assignment_unit="device"),
    Sweep("20 % of edge devices stop after a day, by device", "aa", 140_000, population=HOLDBACK_BY_DEVICE,
          edge_churn=0.20, assignment_unit="device"),
)
def family_sweeps(population: Any, rows: int) -> tuple[Sweep, ...]:
    """The heterogeneity family's sweeps on one population: A/A and adoption losses of 3, 10 and 15 %."""
    return tuple(Sweep(name, "aa", rows, loss=loss, population=population)
                 for name, loss in (("A/A", 0.0), ("adoption loss at the tolerance (3 %)", 0.03),
                                    ("adoption loss 10 %", 0.10), ("adoption loss 15 %", 0.15)))


# the redrawn latency: lognormal with the simulator's typical spread within a segment (log-sd 0.27-0.45,
# median 0.33); device-clustered, 40 % of its variance is the device's (CLUSTERED's speed sd 0.25 gives ~0.37)
P95_LOG_SD, P95_DEVICE_SHARE = 0.35, 0.4


@dataclass
class SweepResult:
    sweep: Sweep
    runs: int = 0
    ever: int = 0  # runs rolled back on some night
    by_night_7: int = 0  # ... on one of the first 7 nights
    for_quality: int = 0  # runs in which quality_loss rolled a segment (or the release) back
    by_gate: dict[str, int] = field(default_factory=dict)  # runs in which this gate rolled something back
    devices_to_detect: list[int] = field(default_factory=list)  # the release-wide quality check's, night 7
    split_flagged: int = 0  # runs in which the assignment check flagged the split on some night
    retention_failed: int = 0  # runs in which retention (observed by default) failed on some night
    first_nights: list[int] = field(default_factory=list)
    median_rows: list[int] = field(default_factory=list)
    looks: int = 0  # p95 sweeps: judged segment looks of inference_duration ...
    looks_failed: int = 0  # ... and how many failed
    near_500: int = 0  # ... of those with 400-700 values
    near_500_failed: int = 0

    def to_dict(self, confidence: float) -> dict[str, Any]:
        lo, hi = stats.wilson(self.ever, self.runs, confidence) or (None, None)
        d: dict[str, Any] = {"sweep": self.sweep.name, "scenario": self.sweep.scenario, "rows": self.sweep.rows,
                             "clustered": self.sweep.clustered, "loss": self.sweep.loss, "runs": self.runs,
                             "rolled_back_some_night": self.ever, "rate": self.ever / self.runs if self.runs else None,
                             "rolled_back_by_night_7": self.by_night_7, "rolled_back_for_quality": self.for_quality,
                             "rolled_back_by_gate": dict(sorted(self.by_gate.items())),
                             "split_flagged_some_night": self.split_flagged,
                             "retention_failed_some_night": self.retention_failed,
                             "interval_95": [lo, hi],
                             "first_night_median": float(np.median(self.first_nights)) if self.first_nights else None,
                             "median_segment_rows": int(np.median(self.median_rows)) if self.median_rows else None}
        if self.sweep.p95_factor is not None:
            d.update(p95_factor=self.sweep.p95_factor, segment_looks=self.looks, segment_looks_failed=self.looks_failed,
                     looks_400_700_values=self.near_500, looks_400_700_failed=self.near_500_failed)
        return d


def run_sweep(sweep: Sweep, seed: int, config: Config, nights: int = 14) -> SweepResult:
    from pipeline.planning.simulate import CLUSTERED, INDEPENDENT

    population = sweep.population or (CLUSTERED if sweep.clustered else INDEPENDENT)
    if sweep.assignment_unit:
        config = dataclasses.replace(config, assignment=dataclasses.replace(config.assignment,
                                                                            unit=sweep.assignment_unit))
    looks = simulated_rollout(sweep.scenario, sweep.rows, seed, config, nights, population, sweep.loss,
                              sweep.p95_factor, fallback_spike=sweep.fallback_spike, silent_share=sweep.silent_share,
                              edge_device_loss=sweep.edge_device_loss, edge_churn=sweep.edge_churn)
    out = SweepResult(sweep, runs=1, median_rows=[_median_segment_rows(looks[-1].result)])
    rolled = [look.night for look in looks if look.rolled]
    if rolled:
        out.ever, out.first_nights = 1, [rolled[0]]
        out.by_night_7 = int(rolled[0] <= 7)
    out.for_quality = int(any(GateName.QUALITY_LOSS in look.rolled_gates for look in looks))
    out.split_flagged = int(any(look.result.assignment is not None and look.result.assignment.status == Status.FAIL
                                for look in looks))
    out.retention_failed = int(any(c.gate == GateName.RETENTION and c.status == Status.FAIL
                                   for look in looks for c in look.result.checks()))
    out.by_gate = {g: 1 for g in set().union(*(look.rolled_gates for look in looks))}
    quality = looks[min(7, len(looks)) - 1].result.release_wide.get(GateName.QUALITY_LOSS)
    if quality is not None and quality.extra.get("devices_to_detect"):
        out.devices_to_detect = [int(quality.extra["devices_to_detect"])]
    if sweep.p95_factor is not None:
        for look in looks:
            for seg in look.result.judged:
                check = seg.checks[GateName.INFERENCE_DURATION]
                if check.status in (Status.PASS, Status.FAIL):
                    out.looks += 1
                    out.looks_failed += check.status == Status.FAIL
                    if 400 <= check.rows <= 700:
                        out.near_500 += 1
                        out.near_500_failed += check.status == Status.FAIL
    return out


def merge(results: list[SweepResult]) -> SweepResult:
    total = SweepResult(results[0].sweep)
    for r in results:
        total.runs += r.runs
        total.ever += r.ever
        total.by_night_7 += r.by_night_7
        total.for_quality += r.for_quality
        total.split_flagged += r.split_flagged
        total.retention_failed += r.retention_failed
        total.devices_to_detect += r.devices_to_detect
        for g, k in r.by_gate.items():
            total.by_gate[g] = total.by_gate.get(g, 0) + k
        total.first_nights += r.first_nights
        total.median_rows += r.median_rows
        total.looks += r.looks
        total.looks_failed += r.looks_failed
        total.near_500 += r.near_500
        total.near_500_failed += r.near_500_failed
    return total


def _redraw_latency(table: pa.Table, config: Config, factor: float, seed: int, share: float) -> pa.Table:
    """Edge total_ms with a known true p95: budget x factor x exp(s (sqrt(r) u_device + sqrt(1-r) e) - 1.645 s)."""
    rng = np.random.default_rng([seed, 95])
    device = _device_uniforms(table, rng, normal=True)
    budget = np.array([config.gates_for(t).inference_duration.max_p95_ms for t in table["task"].to_pylist()])
    z = np.sqrt(share) * device + np.sqrt(1 - share) * rng.standard_normal(table.num_rows)
    total = budget * factor * np.exp(P95_LOG_SD * z - 1.6448536269514722 * P95_LOG_SD)
    edge = np.asarray(pc.not_equal(table["route"], Route.CLOUD.value))
    new_total = np.where(edge, np.round(total, 1), np.asarray(table["total_ms"]))
    ttft = np.asarray(table["ttft_ms"].to_numpy(zero_copy_only=False), dtype=float)
    new_ttft = np.where(edge & ~np.isnan(ttft), np.minimum(ttft, new_total), ttft)
    table = table.set_column(table.schema.get_field_index("total_ms"), "total_ms", pa.array(new_total))
    return table.set_column(table.schema.get_field_index("ttft_ms"), "ttft_ms",
                            pa.array(new_ttft, mask=np.isnan(new_ttft)))


@dataclass
class SimulatedResult:
    """`pipeline backtest --simulated`: the sweeps of SWEEPS over `runs` seeds each."""

    runs: int
    nights: int
    config: Config
    results: list[SweepResult]

    def to_dict(self) -> dict[str, Any]:
        c = self.config
        return {"schema_version": SCHEMA_VERSION, "simulated": True, "runs": self.runs, "nights": self.nights,
                **_settings(c),
                "sweeps": [r.to_dict(c.statistics.confidence) for r in self.results]}

    def __str__(self) -> str:
        c = self.config
        conf = c.statistics.confidence
        lines = [f"simulated releases: {self.runs} seeds each, judged on each of {self.nights} nights; "
                 f"{_settings_line(c)}", "",
                 f"{'release':<56} {'rolled back on some night':>26} {'95% interval':>13} {'first night':>11} "
                 f"{'seg rows':>8}  by gate; p95 gate: failing looks (400-700 values)"]
        for r in self.results:
            d = r.to_dict(conf)
            lo, hi = d["interval_95"]
            first = f"{d['first_night_median']:g}" if d["first_night_median"] is not None else "-"
            looks = ""
            if r.sweep.p95_factor is not None:
                looks = (f"{_share(r.looks_failed, r.looks)} of {r.looks:,} looks "
                         f"({_share(r.near_500_failed, r.near_500)} of {r.near_500:,})")
            rate = f"{r.ever} of {r.runs} ({d['rate']:.0%})"
            interval = f"{lo:.0%}-{hi:.0%}"
            gates = ", ".join(f"{g} {k}" for g, k in sorted(r.by_gate.items()))
            guard = [f"split flagged {r.split_flagged}"] * bool(r.sweep.assignment_unit or r.split_flagged) + \
                [f"retention failed {r.retention_failed}"] * bool(r.sweep.assignment_unit or r.retention_failed)
            lines.append(f"{r.sweep.name:<56} {rate:>26} {interval:>13} {first:>11} "
                         f"{d['median_segment_rows']:>8,}  " + "; ".join(x for x in (gates, *guard, looks) if x))
        lines += ["", "rolled back on some night: the rollout state machine rolled a segment (or the release) back on "
                      "at least one of the nights; first night: median night of the first rollback; seg rows: median "
                      "edge rows per segment on the last night; by gate: runs in which that gate rolled something "
                      "back; split flagged: runs in which the assignment check flagged the hold-back split on some "
                      "night (its comparisons then held); retention failed: runs in which retention (observed) "
                      "failed on some night; p95 gate: inference_duration looks that failed, of all judged "
                      "segment looks (and of those with 400-700 values)."]
        return "\n".join(lines)


def _share(k: int, n: int) -> str:
    return f"{k / n:.1%}" if n else "-"


def simulated(config: Config, runs: int, jobs: int = 1, sweeps: tuple[Sweep, ...] = SWEEPS,
              nights: int = 14) -> SimulatedResult:
    """Every sweep over seeds 0 .. runs - 1, in `jobs` processes."""
    tasks = [(sweep, seed, config, nights) for sweep in sweeps for seed in range(runs)]
    if jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            done = pool.starmap(run_sweep, tasks)
    else:
        done = [run_sweep(*t) for t in tasks]
    return SimulatedResult(runs, nights, config, [merge(done[i * runs:(i + 1) * runs]) for i in range(len(sweeps))])


def simulated_rollout(scenario: str, rows: int, seed: int, config: Config, nights: int = 14,
                      population: Any = None, edge_adoption_loss: float = 0.0, p95_factor: float | None = None,
                      start: datetime = datetime(2026, 11, 1), fallback_spike: float = 0.0,
                      silent_share: float = 0.0, edge_device_loss: float = 0.0,
                      edge_churn: float = 0.0) -> list[NightLook]:
    """A release of `pipeline simulate` rolled out over `nights` days (rows spread evenly), judged after
    each night with the configured policy: the seed sweeps of docs/operating-characteristics.md."""
    from pipeline.planning.simulate import INDEPENDENT, generate

    population = population or INDEPENDENT
    table = generate("4.12", rows, scenario, seed=seed, start=start, days=nights,
                     population=population, edge_adoption_loss=edge_adoption_loss,
                     edge_device_loss=edge_device_loss, edge_churn=edge_churn)
    rng = np.random.default_rng([seed, 25])
    if fallback_spike:
        table = _fallback_spike(table, rng, fallback_spike, population.adoption_concentration)
    if silent_share:
        table = _silent_failures(table, rng, silent_share, population.adoption_concentration)
    if p95_factor is not None:
        table = _redraw_latency(table, config, p95_factor, seed,
                                P95_DEVICE_SHARE if population not in (None, INDEPENDENT) else 0.0)
    table = table.append_column("file_id", pa.array(np.zeros(table.num_rows, dtype=np.int32)))
    # one DuckDB thread: sweeps run one process per core
    return replay_nights(load_scratch(table, config, threads=1), "4.12", config, start + timedelta(days=1), nights)
