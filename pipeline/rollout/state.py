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

Insufficient looks change nothing. A hold (a failing `mode: hold` gate, a pause, a deny window or time
outside the allow windows: pipeline/rollout/windows.py) stops every move toward the edge at that look:
the state, its counters and its route stay, and `held` says why; failures still move.
Recovery is stricter than failing: it needs recover_looks consecutive passes after a dwell, where
failing needs fail_looks of window_looks. So a segment failing on alternate nights is rolled back once
and stays rolled back (every failure restarts the dwell): no edge -> cloud -> edge flapping.

People's actions (pipeline/rollout/actions.py) shape the states: a pause holds them; a forced rollback or a
promote in force at the time of reading is the segment's `override`, which sets its route while `state`
stays the gate's own.

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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple

from pipeline.common.config import Config, Rollout
from pipeline.common.vocabulary import PREVIOUS_EDGE, Outcome, Route, RouteCause, Verdict
from pipeline.common.vocabulary import Status as CheckStatus
from pipeline.rollout import actions, windows
from pipeline.warehouse import sqlfiles

STATES = ("ok", "suspect", "rolled_back", "recovering")
RELEASE = "release"  # the segment key of the release-wide gates
FAILED_DECISION = Verdict.ROLLBACK_TO_CLOUD  # what a failing look decided
ROLLED = ("rolled_back", "recovering")
OUTCOMES = {Verdict.ROLLBACK_TO_CLOUD: Outcome.FAIL, Verdict.KEEP_EDGE: Outcome.PASS,
            Verdict.INSUFFICIENT_DATA: Outcome.INSUFFICIENT}


@dataclass(frozen=True)
class Look:
    day: date
    outcome: str  # fail | pass | insufficient
    decision: str
    failed_gates: tuple[str, ...] = ()
    held_gates: tuple[str, ...] = ()  # failing gates of mode hold
    at: datetime = datetime.min  # when it was evaluated: orders it among the actions
    intraday: bool = False  # a failing intra-day look (pipeline look), between the whole-day looks

    @property
    def when(self) -> str:
        return f"{self.day}, intra-day look at {self.at:%H:%M} UTC" if self.intraday else str(self.day)


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
    held: str = ""  # what held its last move toward the edge (or a failing hold gate), in words
    override: dict[str, Any] | None = None  # the forced rollback or promote in force (Action.to_dict + waiting)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["failed_gates"] = list(self.failed_gates)
        return {k: v.isoformat() if isinstance(v, date) else v for k, v in d.items()}


RANK = {"ok": 0, "suspect": 1, "recovering": 2, "rolled_back": 3}  # distance from the edge


def _toward_edge(before: SegmentState, after: SegmentState) -> bool:
    return RANK[after.state] < RANK[before.state] or (after.state == before.state == "recovering"
                                                      and after.passes > before.passes)


def advance(s: SegmentState, look: Look, policy: Rollout, hold: str | None = None) -> SegmentState:
    """The state after one more look (looks come in time order); `hold`: what holds moves toward the edge now."""
    after = _advance(s, look, policy)
    if hold and _toward_edge(s, after):
        waits = f"{after.state} waits" if after.state != s.state else "recovery waits"
        return dataclasses.replace(s, last_day=look.day, last_decision=look.decision, held=hold,
                                   reason=f"passed on {look.day}; {waits}: {hold}")  # only a pass moves that way
    return dataclasses.replace(after, held=hold if look.held_gates else "")


def _advance(s: SegmentState, look: Look, policy: Rollout) -> SegmentState:
    s = dataclasses.replace(s, last_day=look.day, last_decision=look.decision)
    if look.outcome == Outcome.INSUFFICIENT:
        return dataclasses.replace(s, reason=f"not enough data on {look.day}") if s.state == "ok" else s
    failed = look.outcome == Outcome.FAIL
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
        return to("rolled_back", f"{fails} of the last {len(recent)} looks failed (last {look.when}: {gates})"
                  if policy.window_looks > 1 else f"failed on {look.when} ({gates})")
    if s.state == "ok":
        if failed:
            return to("suspect", f"failed on {look.when} ({gates}); rolled back if {policy.fail_looks} of the "
                                 f"last {policy.window_looks} looks fail")
        return to("ok", f"passed on {look.day}")
    if s.state == "suspect":
        if "F" not in recent and len(recent) >= policy.window_looks:
            return to("ok", f"{len(recent)} passing looks since the failure on {s.last_fail}", recent="")
        return to("suspect", f"{fails} of the last {len(recent)} looks failed (last {s.last_fail}: {gates}); "
                             f"rolled back at {policy.fail_looks}")
    if s.state == "rolled_back":
        if failed:
            return to("rolled_back", f"failed again on {look.when} ({gates}); recovery starts "
                                     f"{policy.min_dwell_days} days after the last failure")
        if (look.day - s.last_fail).days >= policy.min_dwell_days:
            return to("recovering", f"1 of {policy.recover_looks} passing looks needed (since {look.day})",
                      passes=1)
        return to("rolled_back", f"passed on {look.day}; recovery starts {policy.min_dwell_days} days after the "
                                 f"last failure ({s.last_fail}: {gates})")
    # recovering
    if failed:
        return to("rolled_back", f"failed while recovering on {look.when} ({gates}); recovery starts "
                                 f"{policy.min_dwell_days} days after it", passes=0)
    passes = s.passes + 1
    if passes >= policy.recover_looks:
        return to("ok", f"recovered on {look.day} after {passes} passing looks", passes=0, recent="")
    return to("recovering", f"{passes} of {policy.recover_looks} passing looks needed", passes=passes)


def fresh(result: dict[str, Any], config: Config) -> dict[str, SegmentState]:
    """The states of a release judged once, with no stored history."""
    holds = holding([], config.rollout)
    return {k: advance(SegmentState(k), look, config.rollout, holds(k, look)) for k, look in looks_of(result).items()}


Holds = Callable[[str, Look], "str | None"]


def holding(acts: list[actions.Action], policy: Rollout) -> Holds:
    """What holds a segment's moves toward the edge at a look: its failing hold gates, a pause, a window."""
    window_at: dict[datetime, str | None] = {}  # every segment's look of an evaluation shares its time

    def hold(segment: str, look: Look) -> str | None:
        parts = [f"hold gate failed: {', '.join(look.held_gates)}"] if look.held_gates else []
        pause = actions.in_force(acts, ("pause",), segment, look.at)
        if pause:
            parts.append(pause.describe())
        if look.at not in window_at:
            window_at[look.at] = windows.hold(policy, look.at)
        window = window_at[look.at]
        if window:
            parts.append(window)
        return "; ".join(parts) or None
    return hold


def replay(segment: str, looks: list[Look], policy: Rollout, holds: Holds | None = None) -> SegmentState:
    state = SegmentState(segment)
    for look in sorted(looks, key=lambda x: (x.day, x.at)):
        state = advance(state, look, policy, holds(segment, look) if holds else None)
    return state


def with_overrides(states: dict[str, SegmentState], acts: list[actions.Action], looks: dict[str, list[Look]],
                   policy: Rollout, now: datetime) -> dict[str, SegmentState]:
    """Each state with the forced rollback or promote in force at `now` as its override."""
    out = {}
    for key, s in states.items():
        forced = actions.in_force(acts, actions.FORCING, key, now)
        if forced and forced.action == "promote" and actions.first_breach(forced, looks.get(key, []), now):
            forced = None  # a gate it did not accept failed since: the gate's own view is back
        override = None
        if forced:
            override = {**forced.to_dict(), "text": forced.describe(), "waiting": None}
            if forced.action == "promote":
                pause = actions.in_force(acts, ("pause",), key, now)
                override["waiting"] = pause.describe() if pause else windows.hold(policy, now)
        out[key] = dataclasses.replace(s, override=override)
    return out


def current(con: Any, release: str, config: Config, now: datetime, acts: list[actions.Action],
            result: dict[str, Any] | None = None) -> dict[str, SegmentState]:
    """Every segment's state at `now`: the stored looks (and `result`'s, not stored yet; the newer evaluation
    of a day wins) and the failing looks of the intra-day looks, replayed with the actions `acts` and the
    windows, with the override in force."""
    by_segment = _stored_looks(con, release)
    fails = _intraday_fails(con, release)
    if result is not None and intraday(result):
        for segment, look in intraday_fails_of(result).items():
            fails.setdefault(segment, []).append(look)
    elif result is not None:
        for segment, look in looks_of(result).items():
            by_segment.setdefault(segment, {})[look.day] = look
    holds = holding(acts, config.rollout)
    states = {segment: replay(segment, [*by_segment.get(segment, {}).values(), *fails.get(segment, [])],
                              config.rollout, holds)
              for segment in {*by_segment, *fails}}
    for a in acts:  # a segment an action names before any evaluation of it
        if a.segment != actions.WHOLE:
            states.setdefault(a.segment, SegmentState(a.segment))
    looks = {segment: [*by_segment.get(segment, {}).values(), *fails.get(segment, [])]
             for segment in {*by_segment, *fails}}  # a promote ends at a failure of a gate it did not accept
    return with_overrides(states, acts, looks, config.rollout, now)


# ------------------------------------------------------------------ looks of one evaluation


def looks_of(result: dict[str, Any]) -> dict[str, Look]:
    """The looks of a stored evaluation (GateResult.to_dict()), by segment key."""
    day = datetime.fromisoformat(result["as_of"].replace("Z", "")).date()
    at = _evaluated_at(result)
    looks = {}
    for s in result["segments"]:
        key = f"{s['task']}/{s['device_tier']}/{s['network_bucket']}"
        looks[key] = Look(day, OUTCOMES[s["decision"]], s["decision"], tuple(s["failed_gates"]),
                          tuple(s.get("held_gates", ())), at)
    failing = {g: c["mode"] for g, c in result["release_wide"].items() if c["status"] == CheckStatus.FAIL}
    blocking = tuple(g for g, mode in failing.items() if mode == "enforce")
    verdict = result["verdict"]
    outcome = (Outcome.FAIL if blocking else Outcome.INSUFFICIENT if verdict == Verdict.INSUFFICIENT_DATA
               else Outcome.PASS)
    looks[RELEASE] = Look(day, outcome, verdict, blocking, tuple(g for g, mode in failing.items() if mode == "hold"),
                          at)
    return looks


def intraday(result: dict[str, Any]) -> bool:
    """Whether a result (GateResult.to_dict()) is an intra-day look's: its window holds the day so far."""
    return not result["window"].get("whole_days", True)


def intraday_fails_of(result: dict[str, Any]) -> dict[str, Look]:
    """An intra-day look's failing looks, by segment key: the only ones that count (a pass moves nothing)."""
    return {key: dataclasses.replace(look, intraday=True) for key, look in looks_of(result).items()
            if look.outcome == Outcome.FAIL}


# ------------------------------------------------------------------ storage


def _stored_looks(con: Any, release: str) -> dict[str, dict[date, Look]]:
    by_segment: dict[str, dict[date, Look]] = {}
    looks = "rollout/looks" if actions.schema_current(con) else "rollout/looks_before_actions"
    for segment, day, outcome, decision, gates, held, at in sqlfiles.run(con, looks, {"release": release}).fetchall():
        by_segment.setdefault(segment, {})[day] = Look(day, outcome, decision, tuple(gates), tuple(held or ()), at)
    return by_segment


def _intraday_fails(con: Any, release: str) -> dict[str, list[Look]]:
    fails: dict[str, list[Look]] = {}
    for segment, day, gates, at in sqlfiles.run(con, "rollout/intraday_fails", {"release": release}).fetchall():
        fails.setdefault(segment, []).append(Look(day, Outcome.FAIL, FAILED_DECISION, tuple(gates), (), at, True))
    return fails


def stored_states(con: Any, release: str) -> dict[str, SegmentState]:
    """The states as the last stored evaluation left them (no action or window read since)."""
    states = {}
    for row in sqlfiles.run(con, "rollout/states", {"release": release}).fetchall():
        segment, state, since, last_day, last_decision, last_fail, passes, recent, gates, reason, _ = row
        states[segment] = SegmentState(segment, state, since, last_day, last_decision, last_fail, passes, recent,
                                       tuple(gates), reason)
    return states


def preview(con: Any, result: dict[str, Any], config: Config, acts: list[actions.Action]) -> dict[str, SegmentState]:
    """The states the stored looks plus this evaluation's give (nothing is written)."""
    return current(con, result["release"], config, _evaluated_at(result), acts, result)


def _evaluated_at(result: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(result["evaluated_at"].replace("Z", ""))


def apply(con: Any, row: dict[str, Any], result: dict[str, Any], config: Config, now: datetime,
          acts: list[actions.Action]) -> dict[str, SegmentState]:
    """Record the looks of one stored evaluation and replay the states of its segments (in the caller's
    transaction); returns every state of the release. An intra-day look's failing looks are read from its
    own row (intraday_looks), stored by the caller."""
    release = result["release"]
    if intraday(result):
        states = current(con, release, config, now, acts)
        store(con, release, states, now)
        return states
    looks = looks_of(result)
    sqlfiles.run(con, "rollout/upsert_looks", {
        "release": release, "segment": list(looks), "day": [look.day for look in looks.values()],
        "outcome": [look.outcome for look in looks.values()], "decision": [look.decision for look in looks.values()],
        "failed_gates": [list(look.failed_gates) for look in looks.values()],
        "held_gates": [list(look.held_gates) for look in looks.values()],
        "evaluation_uid": row["evaluation_uid"], "evaluated_at": datetime.fromisoformat(row["evaluated_at"]),
        "trigger": row["trigger"]})
    states = current(con, release, config, now, acts)
    store(con, release, states, now)
    return states


def store(con: Any, release: str, states: dict[str, SegmentState], now: datetime) -> None:
    rows = list(states.values())
    sqlfiles.run(con, "rollout/set_states", {
        "release": release, "updated_at": now, "failed_gates": [list(s.failed_gates) for s in rows],
        **{column: [getattr(s, column) for s in rows]
           for column in ("segment", "state", "since", "last_day", "last_decision", "last_fail", "passes", "recent",
                          "reason")}})


# ------------------------------------------------------------------ what the states mean for the app


@dataclass(frozen=True)
class RolloutStatus:
    """A release's rollout status: what an alert is about."""
    kind: str  # ok | insufficient_data | held | suspect | partial_rollback | rollback_to_cloud
    segments: tuple[str, ...]  # the segments the kind is about (rolled back, suspect or held)
    total: int  # segments of the release
    overrides: tuple[str, ...] = ()  # "segment: action by actor (id)" of every override in force

    def same_as(self, other: RolloutStatus) -> bool:
        """The same status, whatever the number of segments around it."""
        return (self.kind, self.segments, self.overrides) == (other.kind, other.segments, other.overrides)

    @property
    def severity(self) -> str:
        return {Verdict.ROLLBACK_TO_CLOUD: "critical", Verdict.PARTIAL_ROLLBACK: "critical", "suspect": "warning",
                "held": "warning", Verdict.INSUFFICIENT_DATA: "warning"}.get(self.kind, "info")


def forced(s: SegmentState | None) -> str | None:
    """The action of the override that sets the segment's route now (rollback | promote), else None."""
    if s is None or not s.override or s.override["waiting"]:
        return None
    return s.override["action"]


def routed_off(s: SegmentState) -> bool:
    """Routed off the edge for a failure or by a forced rollback; a promote in force keeps it on the edge."""
    return forced(s) == "rollback" or (s.state in ROLLED and forced(s) != "promote")


def release_rolled_back(states: dict[str, SegmentState]) -> bool:
    rel = states.get(RELEASE)
    segments = [s for k, s in states.items() if k != RELEASE]
    judged = [s for s in segments if s.state != "ok" or s.last_decision != Verdict.INSUFFICIENT_DATA or forced(s)]
    rolled = [s for s in segments if routed_off(s)]
    return bool(rel and routed_off(rel)) or bool(rolled and len(rolled) == len(judged))


def status(states: dict[str, SegmentState]) -> RolloutStatus:
    segments = {k: s for k, s in states.items() if k != RELEASE}
    total = len(segments)
    rel = states.get(RELEASE)
    overrides = tuple(sorted(f"{k}: {s.override['action']} by {s.override['actor']} ({s.override['action_id'][:8]})"
                             for k, s in states.items() if s.override))
    rolled = tuple(sorted(k for k, s in segments.items() if routed_off(s)))
    if release_rolled_back(states):
        return RolloutStatus(Verdict.ROLLBACK_TO_CLOUD, tuple(sorted(segments)), total, overrides)
    if rolled:
        return RolloutStatus(Verdict.PARTIAL_ROLLBACK, rolled, total, overrides)
    suspect = tuple(sorted(k for k, s in states.items() if s.state == "suspect" and not forced(s)))
    if suspect:
        return RolloutStatus("suspect", suspect, total, overrides)
    held = tuple(sorted(k for k, s in states.items() if s.held))
    if held:
        return RolloutStatus("held", held, total, overrides)
    if rel and rel.last_decision == Verdict.INSUFFICIENT_DATA:
        return RolloutStatus(Verdict.INSUFFICIENT_DATA, (), total, overrides)
    return RolloutStatus("ok", (), total, overrides)


class Routed(NamedTuple):
    """A segment's route, why in words, and the kind of reason (RouteCause)."""
    route: str
    why: str
    cause: RouteCause


def route_for(segment: str, states: dict[str, SegmentState], config: Config, previous: Any = None) -> Routed:
    """The segment's route and why; `previous` (rollout/previous.py) turns a route to the cloud into one to the
    previous release's edge model where that model passed."""
    route, why, cause = _route_for(segment, states, config)
    if route == Route.CLOUD and previous is not None and previous.serves(segment):
        route, why = PREVIOUS_EDGE, (f"{why}; the previous release {previous.release}'s edge model "
                                     f"{previous.model_id or '(unknown)'} passed here")
    s = states.get(segment)
    action = forced(s)
    if action == "rollback":
        return Routed(Route.CLOUD, f"override: {s.override['text']} (the gate's own route: {route}, {why})",
                      RouteCause.PERSON)
    if action == "promote":
        accepted = ", ".join(s.override["gates"]) or "none"
        return Routed(Route.EDGE, f"override: {s.override['text']}; accepting failures of: {accepted} "
                                  f"(the gate's own route: {route}, {why})", RouteCause.PERSON)
    if s is not None and s.override:
        why += f"; the promote {s.override['text']!r} waits: {s.override['waiting']}"
    return Routed(route, why, cause)


def _route_for(segment: str, states: dict[str, SegmentState], config: Config) -> Routed:
    s = states.get(segment) or SegmentState(segment)
    rel = states.get(RELEASE)
    if release_rolled_back(states):
        why = f"release-wide rollback: {rel.reason}" if rel and rel.state in ROLLED else \
            "release-wide rollback: every judged segment is rolled back"
        return Routed(Route.CLOUD, why, RouteCause.RELEASE_WIDE)
    if s.state in ROLLED:
        if s.failed_gates and set(s.failed_gates) <= set(config.routing.cloud_check_catches):
            return Routed(Route.EDGE_WITH_CLOUD_CHECK, f"{s.state}; a cloud check catches: "
                                                       f"{', '.join(s.failed_gates)}", RouteCause.OWN_GATES)
        return Routed(Route.CLOUD, f"{s.state}: {s.reason}", RouteCause.OWN_GATES)
    if s.state == "suspect":
        return Routed(Route.EDGE_WITH_CLOUD_CHECK, f"suspect: {s.reason}", RouteCause.OWN_GATES)
    if rel and rel.state == "suspect":
        return Routed(Route.EDGE_WITH_CLOUD_CHECK, f"release-wide gates suspect: {rel.reason}",
                      RouteCause.RELEASE_WIDE)
    if s.last_decision in ("", Verdict.INSUFFICIENT_DATA):
        return Routed(config.routing.insufficient_data_route, "not enough data to judge", RouteCause.NOT_JUDGED)
    return Routed(Route.EDGE, "all gates pass", RouteCause.OWN_GATES)


def standing(segment: str, states: dict[str, SegmentState], config: Config) -> dict[str, Any]:
    """One segment as people act on it: the gate's own state, the route and why, what holds it, the override."""
    s = states[segment]
    route, why, cause = route_for(segment, states, config) if segment != RELEASE else (None, s.reason, None)
    return {"state": s.state, "route": route, "route_reason": why, "route_cause": cause,
            "held": s.held or None, "override": s.override}


def routes(states: dict[str, SegmentState], config: Config, previous: Any = None) -> dict[str, Routed]:
    return {k: route_for(k, states, config, previous) for k in sorted(states) if k != RELEASE}


def headline(status: RolloutStatus, before: RolloutStatus, config: Config, routes: dict[str, Routed]) -> str:
    text = _headline(status, before, config, routes)
    if status.overrides:  # never read as the gate's own view
        n = len(status.overrides)
        text += f"; {n} segment{'s' if n > 1 else ''} overridden by people: " + ", ".join(status.overrides)
    return text


def _headline(status: RolloutStatus, before: RolloutStatus, config: Config, routes: dict[str, Routed]) -> str:
    n, k = status.total, len(status.segments)
    previous = sum(seg in routes and routes[seg].route == PREVIOUS_EDGE for seg in status.segments)
    if status.kind in (Verdict.ROLLBACK_TO_CLOUD, Verdict.PARTIAL_ROLLBACK) and previous:
        checked = sum(seg in routes and routes[seg].route == Route.EDGE_WITH_CLOUD_CHECK for seg in status.segments)
        parts = [f"{k - checked - previous} to cloud"] * (k - checked - previous > 0) \
            + [f"{checked} to cloud check"] * (checked > 0) + [f"{previous} to the previous edge model"]
        kind = "rollback" if status.kind == Verdict.ROLLBACK_TO_CLOUD else "partial rollback"
        return f"{kind}: {k} of {n} segments rolled back: {', '.join(parts)}"
    if status.kind == Verdict.ROLLBACK_TO_CLOUD:
        return f"rollback: all {n} segments to cloud"
    if status.kind == Verdict.PARTIAL_ROLLBACK:
        checked = sum(seg in routes and routes[seg].route == Route.EDGE_WITH_CLOUD_CHECK for seg in status.segments)
        text = f"partial rollback: {k - checked} of {n} segments to cloud"
        return text + (f", {checked} to cloud check" if checked else "")
    if status.kind == "suspect":
        return f"suspect: {k} of {n} segments failed a look; cloud check on until the next looks decide"
    if status.kind == "held":
        return f"held: {k} of {n} segments hold their state (a hold gate failed, a pause or a window)"
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
    actions: list[Any] = dataclasses.field(default_factory=list)  # people's actions on it (actions.Action)
    published: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # views/render.last_published
    intraday: dict[str, Any] | None = None  # views/render.intraday_latency: the newest look that moved a state

    def _rows(self) -> list[dict[str, Any]]:
        routes = {k: route_for(k, self.states, self.config, self.previous) for k in self.states}
        return [{**s.to_dict(), "route": routes[k].route if k != RELEASE else "",
                 "route_reason": routes[k].why if k != RELEASE else "",
                 "route_cause": routes[k].cause if k != RELEASE else ""}
                for k, s in sorted(self.states.items(), key=lambda kv: (kv[0] == RELEASE, kv[0]))]

    def to_dict(self) -> dict[str, Any]:
        st = status(self.states)
        from pipeline.common.output_schema import SCHEMA_VERSION

        return {"schema_version": SCHEMA_VERSION, "release": self.release, "status": st.kind,
                "severity": st.severity,
                "headline": headline(st, st, self.config, routes(self.states, self.config, self.previous)),
                "snapshot": self.snapshot,
                "policy": dataclasses.asdict(self.config.rollout), "segments": self._rows(),
                "actions": [a.to_dict() for a in self.actions],
                "published": self.published, "intraday": self.intraday}
