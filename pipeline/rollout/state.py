"""Rollout state per segment across evaluations, and the routing derived from it.

A *look* is what one as-of day's evaluation says of a segment: fail (an enforced
gate failed), pass, or insufficient (not enough data: no evidence either way).
The nightly job and CI may both evaluate on one day; only the last stored
evaluation of a day counts, so two runs of one day are one look, not two
independent failures. The release-wide gates are one more segment, "release".

States and moves, policy `rollout:` in gates/admission.yaml (defaults in brackets):

    ok          --fail_looks [1] of the last window_looks [1] decisive looks fail-->  rolled_back
    ok          --a failing look, fewer than fail_looks-->  suspect   (e.g. with 2 of 3)
    suspect     --fail_looks of the last window_looks looks fail-->  rolled_back
    suspect     --window_looks passing looks in a row-->    ok
    rolled_back --a pass at least min_dwell_days [2] after the last failure-->  recovering
    recovering  --recover_looks [3] passes in a row (the first counted)-->  ok
    recovering  --fail-->                                  rolled_back (the dwell starts again)

Insufficient looks change nothing. Recovery is stricter than failing: it needs
recover_looks consecutive passes after a dwell, where failing needs fail_looks
of window_looks. So a segment failing on alternate nights is rolled back once
and stays rolled back (every failure restarts the dwell): no edge -> cloud -> edge flapping.

Routes (the routing table the app reads):
    release-wide rollback (the "release" segment rolled back or recovering, or every
      judged segment rolled back)                -> every segment cloud
    ok           edge; insufficient data -> routing.insufficient_data_route
    suspect      edge_with_cloud_check: a cloud check guards while the next looks decide
    rolled_back, recovering   cloud, or edge_with_cloud_check when a cloud check catches every
                 gate of its last failure (routing.cloud_check_catches). Recovering keeps the
                 rollback's route: the route changes only when the state is ok again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pipeline.common.config import Config, Rollout
from pipeline.common.vocabulary import PREVIOUS_EDGE, Route, Verdict
from pipeline.common.vocabulary import Status as CheckStatus
from pipeline.warehouse import sqlfiles

STATES = ("ok", "suspect", "rolled_back", "recovering")
RELEASE = "release"  # the segment key of the release-wide gates
ROLLED = ("rolled_back", "recovering")
OUTCOMES = {Verdict.ROLLBACK_TO_CLOUD: "fail", Verdict.KEEP_EDGE: "pass", Verdict.INSUFFICIENT_DATA: "insufficient"}


@dataclass(frozen=True)
class Look:
    day: date
    outcome: str  # fail | pass | insufficient
    decision: str
    failed_gates: tuple[str, ...] = ()


@dataclass(frozen=True)
class SegmentState:
    segment: str
    state: str = "ok"
    since: date | None = None
    last_day: date | None = None
    last_decision: str = ""
    last_fail: date | None = None
    passes: int = 0
    recent: str = ""  # the last window_looks decisive looks, oldest first: F / P
    failed_gates: tuple[str, ...] = ()
    reason: str = "not evaluated yet"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["failed_gates"] = list(self.failed_gates)
        return {k: v.isoformat() if isinstance(v, date) else v for k, v in d.items()}


def advance(s: SegmentState, look: Look, policy: Rollout) -> SegmentState:
    """The state after one more look (looks come in day order)."""
    s = dataclasses.replace(s, last_day=look.day, last_decision=look.decision)
    if look.outcome == "insufficient":
        return dataclasses.replace(s, reason=f"not enough data on {look.day}") if s.state == "ok" else s
    failed = look.outcome == "fail"
    recent = (s.recent + ("F" if failed else "P"))[-policy.window_looks:]
    s = dataclasses.replace(s, recent=recent)
    if failed:
        s = dataclasses.replace(s, last_fail=look.day, failed_gates=look.failed_gates)
    gates = ", ".join(s.failed_gates)
    fails = recent.count("F")

    def to(state: str, reason: str, **changes: Any) -> SegmentState:
        since = look.day if state != s.state else s.since
        return dataclasses.replace(s, state=state, since=since, reason=reason, **changes)

    if s.state in ("ok", "suspect") and failed and fails >= policy.fail_looks:
        return to("rolled_back", f"{fails} of the last {len(recent)} looks failed (last {look.day}: {gates})"
                  if policy.window_looks > 1 else f"failed on {look.day} ({gates})")
    if s.state == "ok":
        if failed:
            return to("suspect", f"failed on {look.day} ({gates}); rolled back if {policy.fail_looks} of the "
                                 f"last {policy.window_looks} looks fail")
        return to("ok", f"passed on {look.day}")
    if s.state == "suspect":
        if "F" not in recent and len(recent) >= policy.window_looks:
            return to("ok", f"{len(recent)} passing looks since the failure on {s.last_fail}", recent="")
        return to("suspect", f"{fails} of the last {len(recent)} looks failed (last {s.last_fail}: {gates}); "
                             f"rolled back at {policy.fail_looks}")
    if s.state == "rolled_back":
        if failed:
            return to("rolled_back", f"failed again on {look.day} ({gates}); recovery starts "
                                     f"{policy.min_dwell_days} days after the last failure")
        if (look.day - s.last_fail).days >= policy.min_dwell_days:
            return to("recovering", f"1 of {policy.recover_looks} passing looks needed (since {look.day})",
                      passes=1)
        return to("rolled_back", f"passed on {look.day}; recovery starts {policy.min_dwell_days} days after the "
                                 f"last failure ({s.last_fail}: {gates})")
    # recovering
    if failed:
        return to("rolled_back", f"failed while recovering on {look.day} ({gates}); recovery starts "
                                 f"{policy.min_dwell_days} days after it", passes=0)
    passes = s.passes + 1
    if passes >= policy.recover_looks:
        return to("ok", f"recovered on {look.day} after {passes} passing looks", passes=0, recent="")
    return to("recovering", f"{passes} of {policy.recover_looks} passing looks needed", passes=passes)


def fresh(result: dict[str, Any], config: Config) -> dict[str, SegmentState]:
    """The states of a release judged once, with no stored history."""
    return {k: advance(SegmentState(k), look, config.rollout) for k, look in looks_of(result).items()}


def replay(segment: str, looks: list[Look], policy: Rollout) -> SegmentState:
    state = SegmentState(segment)
    for look in sorted(looks, key=lambda x: x.day):
        state = advance(state, look, policy)
    return state


# ------------------------------------------------------------------ looks of one evaluation


def looks_of(result: dict[str, Any]) -> dict[str, Look]:
    """The looks of a stored evaluation (GateResult.to_dict()), by segment key."""
    day = datetime.fromisoformat(result["as_of"].replace("Z", "")).date()
    looks = {}
    for s in result["segments"]:
        key = f"{s['task']}/{s['device_tier']}/{s['network_bucket']}"
        looks[key] = Look(day, OUTCOMES[s["decision"]], s["decision"], tuple(s["failed_gates"]))
    blocking = tuple(g for g, c in result["release_wide"].items()
                     if c["status"] == CheckStatus.FAIL and c["mode"] == "enforce")
    verdict = result["verdict"]
    outcome = "fail" if blocking else "insufficient" if verdict == Verdict.INSUFFICIENT_DATA else "pass"
    looks[RELEASE] = Look(day, outcome, verdict, blocking)
    return looks


# ------------------------------------------------------------------ storage


def _stored_looks(con: Any, release: str) -> dict[str, dict[date, Look]]:
    by_segment: dict[str, dict[date, Look]] = {}
    for segment, day, outcome, decision, gates in sqlfiles.run(con, "rollout/looks", {"release": release}).fetchall():
        by_segment.setdefault(segment, {})[day] = Look(day, outcome, decision, tuple(gates))
    return by_segment


def stored_states(con: Any, release: str) -> dict[str, SegmentState]:
    states = {}
    for row in sqlfiles.run(con, "rollout/states", {"release": release}).fetchall():
        segment, state, since, last_day, last_decision, last_fail, passes, recent, gates, reason, _ = row
        states[segment] = SegmentState(segment, state, since, last_day, last_decision, last_fail, passes, recent,
                                       tuple(gates), reason)
    return states


def preview(con: Any, result: dict[str, Any], config: Config) -> dict[str, SegmentState]:
    """The states the stored looks plus this evaluation's give (nothing is written)."""
    by_segment = _stored_looks(con, result["release"])
    for segment, look in looks_of(result).items():
        by_segment.setdefault(segment, {})[look.day] = look  # the newer evaluation of a day wins
    return {segment: replay(segment, list(days.values()), config.rollout) for segment, days in by_segment.items()}


def apply(con: Any, row: dict[str, Any], result: dict[str, Any], config: Config,
          now: datetime) -> dict[str, SegmentState]:
    """Record the looks of one stored evaluation and replay the states of its segments (in the caller's
    transaction); returns every state of the release."""
    release = result["release"]
    for segment, look in looks_of(result).items():
        sqlfiles.run(con, "rollout/upsert_look", {
            "release": release, "segment": segment, "day": look.day, "outcome": look.outcome,
            "decision": look.decision, "failed_gates": list(look.failed_gates),
            "evaluation_uid": row["evaluation_uid"], "evaluated_at": datetime.fromisoformat(row["evaluated_at"]),
            "trigger": row["trigger"]})
    states = {segment: replay(segment, list(days.values()), config.rollout)
              for segment, days in _stored_looks(con, release).items()}
    for s in states.values():
        sqlfiles.run(con, "rollout/set_state", {
            "release": release, "segment": s.segment, "state": s.state, "since": s.since, "last_day": s.last_day,
            "last_decision": s.last_decision, "last_fail": s.last_fail, "passes": s.passes, "recent": s.recent,
            "failed_gates": list(s.failed_gates), "reason": s.reason, "updated_at": now})
    return states


# ------------------------------------------------------------------ what the states mean for the app


@dataclass(frozen=True)
class Status:
    """A release's rollout status: what an alert is about."""
    kind: str  # ok | insufficient_data | suspect | partial_rollback | rollback_to_cloud
    segments: tuple[str, ...]  # the segments the kind is about (rolled back, or suspect)
    total: int  # segments of the release

    def same_as(self, other: Status) -> bool:
        """The same status, whatever the number of segments around it."""
        return (self.kind, self.segments) == (other.kind, other.segments)

    @property
    def severity(self) -> str:
        return {Verdict.ROLLBACK_TO_CLOUD: "critical", Verdict.PARTIAL_ROLLBACK: "critical", "suspect": "warning",
                Verdict.INSUFFICIENT_DATA: "warning"}.get(self.kind, "info")


def release_rolled_back(states: dict[str, SegmentState]) -> bool:
    rel = states.get(RELEASE)
    segments = [s for k, s in states.items() if k != RELEASE]
    judged = [s for s in segments if s.state != "ok" or s.last_decision != Verdict.INSUFFICIENT_DATA]
    rolled = [s for s in segments if s.state in ROLLED]
    return bool(rel and rel.state in ROLLED) or bool(rolled and len(rolled) == len(judged))


def status(states: dict[str, SegmentState]) -> Status:
    segments = {k: s for k, s in states.items() if k != RELEASE}
    total = len(segments)
    rel = states.get(RELEASE)
    rolled = tuple(sorted(k for k, s in segments.items() if s.state in ROLLED))
    if release_rolled_back(states):
        return Status(Verdict.ROLLBACK_TO_CLOUD, tuple(sorted(segments)), total)
    if rolled:
        return Status(Verdict.PARTIAL_ROLLBACK, rolled, total)
    suspect = tuple(sorted(k for k, s in states.items() if s.state == "suspect"))
    if suspect:
        return Status("suspect", suspect, total)
    if rel and rel.last_decision == Verdict.INSUFFICIENT_DATA:
        return Status(Verdict.INSUFFICIENT_DATA, (), total)
    return Status("ok", (), total)


def route_for(segment: str, states: dict[str, SegmentState], config: Config,
              previous: Any = None) -> tuple[str, str]:
    """The segment's route and why; `previous` (rollout/previous.py) turns a route to the cloud into one to the
    previous release's edge model where that model passed."""
    route, why = _route_for(segment, states, config)
    if route == Route.CLOUD and previous is not None and previous.serves(segment):
        return PREVIOUS_EDGE, (f"{why}; the previous release {previous.release}'s edge model "
                               f"{previous.model_id or '(unknown)'} passed here")
    return route, why


def _route_for(segment: str, states: dict[str, SegmentState], config: Config) -> tuple[str, str]:
    s = states.get(segment) or SegmentState(segment)
    rel = states.get(RELEASE)
    if release_rolled_back(states):
        why = f"release-wide rollback: {rel.reason}" if rel and rel.state in ROLLED else \
            "release-wide rollback: every judged segment is rolled back"
        return Route.CLOUD, why
    if s.state in ROLLED:
        if s.failed_gates and set(s.failed_gates) <= set(config.routing.cloud_check_catches):
            return Route.EDGE_WITH_CLOUD_CHECK, f"{s.state}; a cloud check catches: {', '.join(s.failed_gates)}"
        return Route.CLOUD, f"{s.state}: {s.reason}"
    if s.state == "suspect":
        return Route.EDGE_WITH_CLOUD_CHECK, f"suspect: {s.reason}"
    if rel and rel.state == "suspect":
        return Route.EDGE_WITH_CLOUD_CHECK, f"release-wide gates suspect: {rel.reason}"
    if s.last_decision in ("", Verdict.INSUFFICIENT_DATA):
        return config.routing.insufficient_data_route, "not enough data to judge"
    return Route.EDGE, "all gates pass"


def routes(states: dict[str, SegmentState], config: Config, previous: Any = None) -> dict[str, tuple[str, str]]:
    return {k: route_for(k, states, config, previous) for k in sorted(states) if k != RELEASE}


def headline(status: Status, before: Status, config: Config,
             routes: dict[str, tuple[str, str]]) -> str:
    n, k = status.total, len(status.segments)
    previous = sum(routes.get(seg, ("",))[0] == PREVIOUS_EDGE for seg in status.segments)
    if status.kind in (Verdict.ROLLBACK_TO_CLOUD, Verdict.PARTIAL_ROLLBACK) and previous:
        checked = sum(routes.get(seg, ("",))[0] == Route.EDGE_WITH_CLOUD_CHECK for seg in status.segments)
        parts = [f"{k - checked - previous} to cloud"] * (k - checked - previous > 0) \
            + [f"{checked} to cloud check"] * (checked > 0) + [f"{previous} to the previous edge model"]
        kind = "rollback" if status.kind == Verdict.ROLLBACK_TO_CLOUD else "partial rollback"
        return f"{kind}: {k} of {n} segments rolled back: {', '.join(parts)}"
    if status.kind == Verdict.ROLLBACK_TO_CLOUD:
        return f"rollback: all {n} segments to cloud"
    if status.kind == Verdict.PARTIAL_ROLLBACK:
        checked = sum(routes.get(seg, ("",))[0] == Route.EDGE_WITH_CLOUD_CHECK for seg in status.segments)
        text = f"partial rollback: {k - checked} of {n} segments to cloud"
        return text + (f", {checked} to cloud check" if checked else "")
    if status.kind == "suspect":
        return f"suspect: {k} of {n} segments failed a look; cloud check on until the next looks decide"
    if status.kind == Verdict.INSUFFICIENT_DATA:
        if not n:
            return "not enough data: no edge rows to judge in the window"
        return f"not enough data: {n} segments on {config.routing.insufficient_data_route} until judged"
    if before.kind == "ok":
        return f"ok: no segment rolled back ({n} segments)"
    if before.kind == Verdict.INSUFFICIENT_DATA:
        return f"judged: all {n} segments keep the edge"
    return f"recovered: no segment rolled back any more ({n} segments)"


def describe(states: dict[str, SegmentState], config: Config) -> str:
    """The release's rollout status in one line, e.g. "partial rollback: 5 of 19 segments to cloud"."""
    st = status(states)
    return headline(st, st, config, routes(states, config))


@dataclass
class StateView:
    """`pipeline state --release R`: every segment's state, route and why."""
    release: str
    states: dict[str, SegmentState]
    config: Config
    previous: Any = None  # rollout/previous.py: routing.previous_edge's fallback model
    snapshot: dict[str, Any] | None = None  # read from a snapshot while a writer held the warehouse

    def _rows(self) -> list[dict[str, Any]]:
        routes = {k: route_for(k, self.states, self.config, self.previous) for k in self.states}
        return [{**s.to_dict(), "route": routes[k][0] if k != RELEASE else "",
                 "route_reason": routes[k][1] if k != RELEASE else ""}
                for k, s in sorted(self.states.items(), key=lambda kv: (kv[0] == RELEASE, kv[0]))]

    def to_dict(self) -> dict[str, Any]:
        st = status(self.states)
        from pipeline.common.output_schema import SCHEMA_VERSION

        return {"schema_version": SCHEMA_VERSION, "release": self.release, "status": st.kind,
                "severity": st.severity,
                "headline": headline(st, st, self.config, routes(self.states, self.config, self.previous)),
                "snapshot": self.snapshot,
                "policy": dataclasses.asdict(self.config.rollout), "segments": self._rows()}
