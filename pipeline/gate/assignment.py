"""The assignment check (sample-ratio mismatch, SRM): every comparison of the edge with the cloud hold-back
is believed only when the units on each arm match the split the rollout declares (gates/admission.yaml
`assignment`, or `pipeline gate --holdback-share`), never a split inferred from the data being checked.

Why it matters more here than in a web experiment: an app killed during edge inference loses that session's
telemetry, so the edge arm under-counts exactly its worst devices and looks healthier than it is (Fabijan et
al., KDD 2019, list crashes and telemetry loss among the common causes of SRM).

Per scope (the release, then each task x tier), the online units on each arm (requests, or devices by their
online requests) are tested against the declared share with an anytime-valid Dirichlet-multinomial test
(stats.srm_p_value; the gate looks every night, and a repeated chi-squared test would inflate false alarms).
A scope is flagged when p <= its alpha (max_p_value release-wide; the task x tier scopes share it,
Bonferroni) and the found share is at least min_deviation from the declared one; or when it leaks (unit
device: devices on both arms; any unit: units on an arm declared at 0 %). A breakdown by app_version,
os_version and soc says where the imbalance comes from. `apply` then holds, fails or only annotates the
comparison checks of a flagged scope (action: hold / rollback / warn).

With no share declared (assignment.holdback_share unset, no --holdback-share), nothing is asserted that nobody
declared: the release's split is reported, not tested, and each task x tier is held to the release's own share
(a rollout holds back one share for all of them: a cell off it lost or gained units), as are the breakdowns;
leaks of devices on both arms are checked as ever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pipeline.common.config import Config
from pipeline.common.registry import CLOUD_COMPARISONS
from pipeline.common.vocabulary import Status
from pipeline.gate import stats
from pipeline.warehouse import sqlfiles

SQL = {"request": "gate/assignment_requests", "device": "gate/assignment_devices"}
RELEASE, TASK_TIER = 0, 1
DIMENSIONS = {2: "app_version", 3: "os_version", 4: "soc"}  # the breakdown, by the SQL's dim
BREAKDOWN_SHOWN = 5  # cells per dimension in the output, most significant first


@dataclass
class Scope:
    scope: str  # "release" or "task/tier"
    cloud: int
    edge: int
    both_arms: int = 0
    p_value: float | None = None
    alpha: float = 0.0
    flagged: bool = False
    reason: str = ""

    @property
    def found(self) -> float | None:
        total = self.cloud + self.edge
        return self.cloud / total if total else None

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "cloud": self.cloud, "edge": self.edge, "both_arms": self.both_arms,
                "found_share": _round(self.found), "p_value": _round(self.p_value), "alpha": self.alpha,
                "flagged": self.flagged, "reason": self.reason}


@dataclass
class AssignmentCheck:
    unit: str
    expected: float | None  # the declared share; None: not declared
    declared_by: str  # "config", "--holdback-share" or "" (not declared)
    action: str
    max_p_value: float
    min_deviation: float
    scopes: list[Scope] = field(default_factory=list)
    breakdown: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if any(s.flagged for s in self.scopes):
            return Status.FAIL
        return Status.PASS if self.scopes else Status.NOT_APPLICABLE  # no online request: nothing assigned

    def flagged_for(self, task: str | None, tier: str | None) -> Scope | None:
        """The flagged scope that covers a task x tier (the release's first; task None: the release alone);
        None when its split holds."""
        for s in self.scopes:
            if s.flagged and (s.scope == "release" or s.scope == f"{task}/{tier}"):
                return s
        return None

    def summary(self) -> str:
        """One line for people: the split found against the one declared, per flagged scope."""
        flagged = [s for s in self.scopes if s.flagged]
        if not flagged:
            return ""
        return f"hold-back split off ({self.action}): " + "; ".join(f"{s.scope}: {s.reason}" for s in flagged)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "unit": self.unit, "expected_holdback_share": self.expected,
                "declared_by": self.declared_by, "action": self.action, "max_p_value": self.max_p_value,
                "min_deviation": self.min_deviation, "method": "Dirichlet-multinomial mixture, anytime-valid "
                "(Lindon & Malek 2020)", "scopes": [s.to_dict() for s in self.scopes], "breakdown": self.breakdown}


def _round(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else round(v, 6 if v >= 1e-6 else 12)


def check(con: Any, params: dict[str, Any], config: Config, declared_by: str = "config") -> AssignmentCheck:
    """The assignment check of one release's window (params: release, window_start, window_end)."""
    a = config.assignment
    rows = sqlfiles.dicts(con, SQL[a.unit], params)
    declared = a.holdback_share is not None
    out = AssignmentCheck(a.unit, a.holdback_share, declared_by if declared else "", a.action, a.max_p_value,
                          a.min_deviation)
    release = [r for r in rows if r["dim"] == RELEASE]
    cells = sorted((r for r in rows if r["dim"] == TASK_TIER), key=lambda r: (r["task"], r["device_tier"]))
    found = _share(release[0]) if release else None
    expected = a.holdback_share if declared else found  # undeclared: the release's own share, for the parts
    if expected is None:
        return out
    concentration = stats.srm_concentration(expected, a.min_deviation)
    if release:
        out.scopes.append(judge(release[0], "release", a.max_p_value, config, concentration,
                                expected if declared else None))
    for r in cells:
        out.scopes.append(judge(r, f"{r['task']}/{r['device_tier']}", a.max_p_value / max(1, len(cells)), config,
                                 concentration, expected, against="declared" if declared else "the release's"))
    off = [s.scope for s in out.scopes[1:] if s.flagged]
    if release and not declared and off:  # a split that differs between its parts is no split to compare by
        out.scopes[0].flagged = True
        out.scopes[0].reason += f"; but {len(off)} task x tier hold back another share: {', '.join(off)}"
    for dim, name in DIMENSIONS.items():
        here = [r for r in rows if r["dim"] == dim]
        judged = [(_test(r, expected, concentration), r) for r in here]
        judged.sort(key=lambda t: (t[0] if math.isfinite(t[0]) else 2.0, str(t[1][name])))
        out.breakdown[name] = [{"value": r[name], "cloud": int(r["cloud"]), "edge": int(r["edge"]),
                                "both_arms": int(r["both_arms"]),
                                "found_share": _round(r["cloud"] / (r["cloud"] + r["edge"]))
                                if r["cloud"] + r["edge"] else None,
                                "p_value": _round(p), "off": bool(math.isfinite(p) and p <= a.max_p_value / len(here))}
                               for p, r in judged[:BREAKDOWN_SHOWN]]
    return out


def _share(row: dict[str, Any]) -> float | None:
    total = row["cloud"] + row["edge"]
    return row["cloud"] / total if total else None


def _test(row: dict[str, Any], expected: float, concentration: float) -> float:
    return stats.srm_p_value((row["cloud"], row["edge"]), (expected, 1 - expected), concentration)


def judge(row: dict[str, Any], name: str, alpha: float, config: Config, concentration: float,
          expected: float | None, against: str = "declared") -> Scope:
    """One scope's units per arm (row: cloud, edge, both_arms) held to `expected` at `alpha` (`against` says
    whose share it is); expected None: the share is reported, not tested (nothing declared it)."""
    a = config.assignment
    s = Scope(name, int(row["cloud"]), int(row["edge"]), int(row["both_arms"]), alpha=alpha)
    p = _test(row, expected, concentration) if expected is not None else math.nan
    s.p_value = p if math.isfinite(p) else None
    unit = "online requests" if a.unit == "request" else "devices"
    found = s.found
    leaks = []
    if a.holdback_share == 0 and s.cloud:
        leaks.append(f"{s.cloud:,} {unit} on the cloud, declared at 0 %")
    if a.holdback_share == 1 and s.edge:
        leaks.append(f"{s.edge:,} {unit} on the edge, declared at 0 %")
    total = s.cloud + s.edge + s.both_arms
    if a.unit == "device" and total and s.both_arms / total > a.max_leaked_share:
        leaks.append(f"{s.both_arms:,} of {total:,} devices on both arms ({s.both_arms / total:.2%}, at most "
                     f"{a.max_leaked_share:.2%} allowed)")
    off = (s.p_value is not None and s.p_value <= alpha and found is not None and expected is not None
           and abs(found - expected) >= a.min_deviation)
    s.flagged = off or bool(leaks)
    if found is not None and expected is None:
        s.reason = (f"hold-back {found:.2%} of {s.cloud + s.edge:,} {unit}, none declared "
                    "(assignment.holdback_share); each task x tier held to it")
    elif found is not None:
        p_text = ("not tested" if s.p_value is None else "p < 0.001" if s.p_value < 0.001
                  else f"p = {s.p_value:.2g}")
        s.reason = (f"hold-back {found:.2%} of {s.cloud + s.edge:,} {unit}, {expected:.2%} {against} "
                    f"({p_text}, alpha {alpha * 100:.2g}%)")
    s.reason = "; ".join([s.reason] * bool(s.reason) + leaks)
    return s


def apply(checks_by_scope: list[tuple[str | None, str | None, Any]], srm: AssignmentCheck) -> None:
    """The action of a flagged scope on its comparison checks, given as (task, tier, check); task None: the
    release-wide checks. hold: a pass becomes insufficient_data; rollback: the check fails; warn: a note only.
    A failure stays a failure: an edge arm that under-counts its worst devices only hides harm."""
    for task, tier, c in checks_by_scope:
        if c.gate not in CLOUD_COMPARISONS or c.status is None:
            continue
        scope = srm.flagged_for(task, tier)
        if scope is None:
            continue
        note = f"the hold-back split is not the declared one ({scope.scope}: {scope.reason})"
        if srm.action == "hold" and c.status == Status.PASS:
            c.status, note = Status.INSUFFICIENT_DATA, note + ": comparison held"
        elif srm.action == "rollback" and c.status != Status.FAIL:
            c.status, note = Status.FAIL, note + ": rolled back (assignment.action)"
        if note not in c.note:
            c.note = f"{c.note}; {note}" if c.note else note
