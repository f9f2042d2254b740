"""What a gate evaluation holds and says: each check's evidence and decision (GateCheck, its Tests and Sizing),
each segment's decision, and the release's verdict and JSON (GateResult.to_dict: the contract's gate object).
pipeline/gate/evaluate.py fills them; the CLI, the rollout, the report and the alerts read them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipeline.common.exit_codes import BY_VERDICT
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.common.registry import label
from pipeline.common.units import figure_of, limit_of
from pipeline.common.vocabulary import Status, Verdict
from pipeline.gate import assignment, quantiles, source
from pipeline.gate.figures import COUNTS_SQL
from pipeline.gate.window import Window

STATUSES = (Status.PASS, Status.FAIL, Status.INSUFFICIENT_DATA, Status.NOT_APPLICABLE)
LATE_FACTOR = 1.25  # a bucket whose p95 arrival lag is this much behind the promptest one's arrives late


@dataclass
class Test:
    """One hypothesis test of a check. burden prove_harm: p is the p-value of 'the threshold holds'
    (small: evidence of harm); prove_safe: of 'the threshold is broken' (small: evidence of safety)."""

    p_value: float
    burden: str
    method: str
    alpha: float | None = None  # the level decide() compared it with
    rejected: bool = False


DETECT_POWER = 0.8  # devices_to_detect: the power against a regression of twice the tolerance


@dataclass(frozen=True)
class Sizing:
    """What a check's `test` needs to catch a regression of twice the tolerance (a quality loss of twice it,
    a fallback excess of twice the margin, a rate twice as far from 1 or 0 as its threshold allows) with
    DETECT_POWER: `units_at(alpha)` of the units its n counts (rows, failures or devices), `units` of them
    present now. `past`: the point estimate is already past the threshold that test guards."""

    test: str
    units_at: Callable[[float], int | None]
    units: float
    devices: int  # the edge devices those units came from (a detected share's failures: all the edge devices)
    past: bool
    catches: str  # the regression, in the note's words: "a loss of twice the tolerance"


@dataclass
class GateCheck:
    gate: str
    mode: str
    burden: str = "prove_harm"
    status: Status | None = None  # None until decide(): then one of STATUSES
    measured: float | None = None
    threshold: float | None = None
    baseline: float | None = None
    baseline_level: str | None = None
    rows: int = 0
    devices: int = 0
    design_effect: float | None = None
    interval: tuple[float | None, float | None] | None = None
    p_value: float | None = None
    borderline: bool = False
    note: str = ""
    values_needed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    sql: str = f"sql/{COUNTS_SQL}.sql"
    # evidence, filled by measurement and weighed by decide()
    tests: dict[str, Test] = field(default_factory=dict)
    short_of_data: bool = False
    inapplicable: bool = False
    release_wide: bool = False  # the gate's primary hypothesis (graphical gatekeeping in decide())
    shared: str = ""  # checks of one gate with the same `shared` read the same figure: one hypothesis in decide()
    # the decision's interval at a given alpha (the test inverted); set by measurement, applied by decide.settle
    bounds: Callable[[float], tuple[float | None, float | None] | None] | None = field(
        default=None, repr=False, compare=False)
    main_test: str = ""  # the test whose level the interval is drawn at
    interval_alpha: float | None = None
    interval_method: str = ""
    reading_interval: tuple[float | None, float | None] | None = None  # fixed-sample 95 %: for reading only
    sizing: Sizing | None = field(default=None, repr=False, compare=False)  # devices_to_detect, set by measurement

    @property
    def blocks(self) -> bool:
        return self.mode == "enforce" and self.status == Status.FAIL

    def add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("status", "mode", "burden", "measured", "threshold", "baseline",
                                           "baseline_level", "rows", "devices", "design_effect", "p_value",
                                           "borderline", "note", "sql")}
        d["status"] = self.status or "undecided"
        d["interval"] = list(self.interval) if self.interval else None
        d["interval_alpha"] = self.interval_alpha
        d["interval_method"] = self.interval_method
        d["interval_95"] = list(self.reading_interval) if self.reading_interval else None
        d["tests"] = {name or "main": {"p_value": t.p_value, "burden": t.burden, "method": t.method,
                                       "alpha": t.alpha, "rejected": t.rejected} for name, t in self.tests.items()}
        if self.values_needed is not None:
            d["values_needed"] = self.values_needed
        if self.shared:
            d["judged_over"] = self.shared
        d.update(self.extra)
        return {k: _json_number(v) for k, v in d.items()}


def _json_number(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6) if math.isfinite(v) else None
    if isinstance(v, list):
        return [_json_number(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_number(x) for k, x in v.items()}
    return v


@dataclass
class Segment:
    task: str
    device_tier: str
    network_bucket: str
    rows: int
    checks: dict[str, GateCheck]
    min_rows: int = 1  # config.min_rows_per_segment: fewer edge rows are not judged

    @property
    def key(self) -> str:
        return f"{self.task}/{self.device_tier}/{self.network_bucket}"

    @property
    def needs_rows(self) -> int | None:
        return self.min_rows - self.rows if self.rows < self.min_rows else None

    @property
    def decision(self) -> Verdict:
        enforced = [c for c in self.checks.values() if c.mode == "enforce"]
        if self.needs_rows is not None or any(c.status is None for c in enforced):
            return Verdict.INSUFFICIENT_DATA
        if any(c.status == Status.FAIL for c in enforced):
            return Verdict.ROLLBACK_TO_CLOUD
        if any(c.status == Status.INSUFFICIENT_DATA for c in enforced):
            return Verdict.INSUFFICIENT_DATA
        return Verdict.KEEP_EDGE

    @property
    def failed_gates(self) -> list[str]:
        return [g for g, c in self.checks.items() if c.blocks]

    def to_dict(self) -> dict[str, Any]:
        d = {"task": self.task, "device_tier": self.device_tier, "network_bucket": self.network_bucket,
             "rows": self.rows, "decision": self.decision, "failed_gates": self.failed_gates,
             "observed_failures": [g for g, c in self.checks.items()
                                   if c.mode == "observe" and c.status == Status.FAIL],
             "held_gates": [g for g, c in self.checks.items() if c.mode == "hold" and c.status == Status.FAIL],
             "metrics": {g: c.to_dict() for g, c in self.checks.items()}}
        if self.needs_rows is not None:
            d["needs_rows"] = self.needs_rows
        return d


@dataclass
class GateResult:
    release: str
    evaluated_at: datetime
    as_of: datetime
    window: Window
    config_source: str
    config_digest: str
    segments: list[Segment]
    release_wide: dict[str, GateCheck]
    cloud_only: bool = False  # the window holds cloud rows of the release but no edge rows
    # release-wide checks that only carry alpha (graphical gatekeeping in decide()); they never block
    gatekeepers: dict[str, GateCheck] = field(default_factory=dict)
    # where the window's p95s came from (pipeline/gate/quantiles.py): estimator, its relative error, the engine
    quantiles: dict[str, Any] = field(default_factory=lambda: {"estimator": quantiles.SKETCH, "relative_error": None,
                                                               "engine": "duckdb"})
    source: source.Source = source.Source(source.ROLLUP)  # what the figures were read from
    held_back_hours: float = 0.0  # config.completeness_lag_hours: rows this much younger than as_of wait
    # per network bucket: rows, and the median and p95 hours from event_time to the file's ingestion
    arrival_lag: dict[str, dict[str, float]] | None = None
    assignment: assignment.AssignmentCheck | None = None  # the hold-back split against the declared one (SRM)
    # routing.dimensions: per judged segment, its cells' own verdicts (pipeline/gate/cells.py)
    cells: dict[str, list[Any]] = field(default_factory=dict)
    cell_dimensions: tuple[str, ...] = ()
    # the snapshot read because a writer held the warehouse (pipeline/warehouse/snapshots.py); None: the warehouse
    snapshot: dict[str, Any] | None = None

    @property
    def window_start(self) -> datetime:
        return self.window.start

    @property
    def window_end(self) -> datetime:
        return self.window.end

    @property
    def late_buckets(self) -> list[str]:
        """Buckets that arrive later than the promptest bucket (a p95 lag over LATE_FACTOR x its, plus an hour)
        and later than the window holds back: their newest rows are under-represented, not missing at random."""
        lag = {b: v["p95_hours"] for b, v in (self.arrival_lag or {}).items() if v.get("p95_hours") is not None}
        if not lag:
            return []
        first = min(lag.values())
        return [b for b, h in sorted(lag.items()) if h > first * LATE_FACTOR + 1 and h > self.held_back_hours]

    @property
    def judged(self) -> list[Segment]:
        return [s for s in self.segments if s.decision != Verdict.INSUFFICIENT_DATA]

    @property
    def verdict(self) -> Verdict:
        return self._verdict()[0]

    @property
    def note(self) -> str:
        note = self._verdict()[1]
        if self.assignment and self.assignment.status == Status.FAIL:
            return f"{note}; the hold-back split is not the declared one (assignment.action: {self.assignment.action})"
        return note

    def _shared_failures(self, rolled: list[Segment]) -> str:
        """'; kill rate fails on the low tier (13.1%, <= 1%)': the gates judged over a whole device tier that
        failed, named once for the tier rather than once per segment."""
        named: dict[tuple[str, str], GateCheck] = {}
        for s in rolled:
            for g in s.failed_gates:
                check = s.checks[g]
                if check.shared:
                    named.setdefault((g, check.shared), check)
        return "".join(f"; {label(g)} fails on the {shared} ({figure_of(g, c.measured)}, {limit_of(g, c.threshold)})"
                       for (g, shared), c in named.items())

    def _verdict(self) -> tuple[Verdict, str]:
        if not self.segments:
            if self.cloud_only:
                return (Verdict.INSUFFICIENT_DATA,
                        "the release has only cloud rows in the window: no edge route to judge")
            return Verdict.INSUFFICIENT_DATA, "the release has no rows in the evaluation window"
        judged = self.judged
        if not judged:
            held = self.assignment and self.assignment.status == Status.FAIL and self.assignment.action == "hold"
            return Verdict.INSUFFICIENT_DATA, ("comparisons with the cloud held: no segment judged" if held
                                               else "no segment has enough rows to judge")
        if any(c.blocks for c in self.release_wide.values()):
            return Verdict.ROLLBACK_TO_CLOUD, "a release-wide gate failed"
        rolled = [s for s in judged if s.decision == Verdict.ROLLBACK_TO_CLOUD]
        if len(rolled) == len(judged):
            return Verdict.ROLLBACK_TO_CLOUD, "every judged segment rolls back"
        if rolled:
            return Verdict.PARTIAL_ROLLBACK, (f"{len(rolled)} of {len(judged)} judged segments roll back"
                                              + self._shared_failures(rolled))
        return Verdict.KEEP_EDGE, f"all {len(judged)} judged segments keep the edge route"

    @property
    def exit_code(self) -> int:
        return BY_VERDICT[self.verdict]

    def checks(self) -> list[GateCheck]:
        """Every check of the evaluation once (pooled quality checks are shared by their segments)."""
        seen: dict[int, GateCheck] = {}
        for c in [c for s in self.segments for c in s.checks.values()] + list(self.release_wide.values()) \
                + list(self.gatekeepers.values()):
            seen.setdefault(id(c), c)
        return list(seen.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "release": self.release,
            "verdict": self.verdict,
            "evaluated_at": self.evaluated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "as_of": self.as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "window": {**self.window.to_dict(), "completeness_lag_hours": self.held_back_hours,
                       "arrival_lag_hours": self.arrival_lag},
            "source": self.source.to_dict(),
            "snapshot": self.snapshot,
            "config": {"path": self.config_source, "digest": self.config_digest},
            "quantiles": dict(self.quantiles),
            "release_wide": {g: c.to_dict() for g, c in self.release_wide.items()},
            "release_gatekeepers": {g: c.to_dict() for g, c in self.gatekeepers.items()},
            "assignment": self.assignment.to_dict() if self.assignment else None,
            "note": self.note,
            "segments": [s.to_dict() for s in self.segments],
            **({"cells": {"dimensions": list(self.cell_dimensions),
                          "segments": {k: [v.to_dict() for v in vs] for k, vs in self.cells.items()}}}
               if self.cell_dimensions else {}),
        }
