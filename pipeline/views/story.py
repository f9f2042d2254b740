"""One release as every output tells it: per segment the route the app follows, why (its kind and its words,
from pipeline/rollout/state.py route_for) and the segment's own evidence. The terminal, the report, the alert
and the CI reports render a ReleaseStory, and `state` and the routing table read the same route_for; none
reads the rollout states its own way, so none can contradict another (a segment that passes its own gates
but goes to the cloud with the whole release says both)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.common.registry import BY_NAME, label
from pipeline.common.units import alpha_text, figure_of, limit_of
from pipeline.common.vocabulary import PREVIOUS_EDGE, Route, RouteCause, Status, Verdict
from pipeline.rollout import state as rollout_state

ROUTE_WORDS = {Route.CLOUD: "to cloud", Route.EDGE: "keep edge", Route.EDGE_WITH_CLOUD_CHECK: "edge, cloud check on",
               PREVIOUS_EDGE: "to the previous edge model"}
ROUTE_ORDER = (Route.CLOUD, PREVIOUS_EDGE, Route.EDGE_WITH_CLOUD_CHECK, Route.EDGE)  # farthest from the edge first
# a heading names the cause when it is not the segment's own (own gates, or no data yet, say themselves)
CAUSE_WORDS = {RouteCause.RELEASE_WIDE: "with the whole release", RouteCause.PERSON: "by a person's action"}
OWN_WORDS = {Verdict.ROLLBACK_TO_CLOUD: "own gates fail", Verdict.KEEP_EDGE: "own gates pass",
             Verdict.INSUFFICIENT_DATA: "not judged"}
OWN_PASS = "passes its own gates"


@dataclass(frozen=True)
class SegmentStory:
    segment: str
    route: str
    cause: str
    why: str  # the route's reason in words, as `pipeline state` and the routing table say it
    decision: str  # what its own gates decided in this evaluation
    evidence: str  # its own figures in words


@dataclass(frozen=True)
class ReleaseStory:
    release: str
    headline: str  # the rollout in one line (rollout_state.headline)
    segments: tuple[SegmentStory, ...]
    overrides: tuple[str, ...] = ()  # "segment: a person's action (waits: ...); the gate's own state: S"
    held: tuple[str, ...] = ()  # "segment: what holds its moves toward the edge"

    def counts(self) -> dict[str, int]:
        """Segments per route, as the routing table has them."""
        out: dict[str, int] = {}
        for s in self.segments:
            out[s.route] = out.get(s.route, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: _rank(kv[0])))

    def routes_text(self) -> str:
        """'36 to cloud' or '12 to cloud, 24 keep edge'."""
        return ", ".join(f"{n} {ROUTE_WORDS.get(r, r)}" for r, n in self.counts().items()) or "no segment"

    def groups(self) -> list[tuple[str, str, str, list[SegmentStory]]]:
        """(route, cause, own decision, segments) in reading order: farthest from the edge first, then own
        failures before passes before the segments not judged."""
        keys: dict[tuple[str, str, str], list[SegmentStory]] = {}
        for s in sorted(self.segments, key=lambda s: (_rank(s.route), s.cause, _own_rank(s.decision), s.segment)):
            keys.setdefault((s.route, s.cause, s.decision), []).append(s)
        return [(*key, group) for key, group in keys.items()]

    def by_segment(self) -> dict[str, SegmentStory]:
        return {s.segment: s for s in self.segments}


def _rank(route: str) -> int:
    return ROUTE_ORDER.index(route) if route in ROUTE_ORDER else len(ROUTE_ORDER)


def _own_rank(decision: str) -> int:
    return list(OWN_WORDS).index(decision) if decision in OWN_WORDS else len(OWN_WORDS)


def group_heading(route: str, cause: str, decision: str, n: int) -> str:
    """'to cloud (12): own gates fail', 'to cloud (2): with the whole release; own gates pass'."""
    why = [CAUSE_WORDS[cause]] if cause in CAUSE_WORDS else []
    return f"{ROUTE_WORDS.get(route, route)} ({n}): " + "; ".join([*why, OWN_WORDS.get(decision, decision)])


def story(result: dict[str, Any], states: dict[str, Any], config: Any, previous: Any = None) -> ReleaseStory:
    """`result`: the evaluation (GateResult.to_dict()); `states`: the rollout states after it
    (rollout_state.preview / apply / current); `previous`: routing.previous_edge's model (rollout/previous.py)."""
    routes = rollout_state.routes(states, config, previous)
    status = rollout_state.status(states)
    segments = []
    for s in result["segments"]:
        key = f"{s['task']}/{s['device_tier']}/{s['network_bucket']}"
        route, why, cause = routes.get(key) or rollout_state.route_for(key, states, config, previous)
        segments.append(SegmentStory(key, route, cause, why, s["decision"], evidence(s)))
    overrides = tuple(f"{k}: {st.override['text']}" + (f" (waits: {st.override['waiting']})"
                                                       if st.override["waiting"] else "")
                      + f"; the gate's own state: {st.state}" for k, st in sorted(states.items()) if st.override)
    held = tuple(f"{k}: {st.held}" for k, st in sorted(states.items()) if st.held)
    return ReleaseStory(result["release"], rollout_state.headline(status, status, config, routes), tuple(segments),
                        overrides, held)


def evidence(segment: dict[str, Any]) -> str:
    """A segment's own figures in words: the gates it fails, or what is past a threshold and not yet proven."""
    metrics = segment["metrics"]
    if segment["decision"] == Verdict.INSUFFICIENT_DATA:
        if segment.get("needs_rows"):
            return f"not judged: needs {segment['needs_rows']:,} more rows"
        lacking = [g for g, c in metrics.items() if c["mode"] == "enforce" and c["status"] == Status.INSUFFICIENT_DATA]
        return "not judged: no data yet for " + ", ".join(label(g) for g in lacking)
    if segment["decision"] == Verdict.ROLLBACK_TO_CLOUD:
        return "fails " + failed_text(metrics, segment["failed_gates"])
    unproven = []
    for g, c in metrics.items():
        if c["mode"] != "enforce" or not c.get("borderline"):
            continue
        more = c.get("more_devices_to_detect")
        wait = f": about {more:,} more edge devices (~{c.get('nights_to_detect', 0):,} nights) would prove it" \
            if more else ""
        alpha = f" at alpha {alpha_text(c['interval_alpha'])}" if c.get("interval_alpha") is not None else ""
        unproven.append(f"{label(g)} {figure_of(g, c['measured'])} past {limit_of(g, c['threshold'])}, not proven"
                        f"{alpha}{wait}")
    return OWN_PASS + ("; " + "; ".join(unproven) if unproven else "")


def failed_text(metrics: dict[str, Any], gates: list[str]) -> str:
    """'quality loss 13.5% (<= 3%), kill rate 13.1% (<= 1%) over the low tier': failed gates with their figures.
    A gate that must be shown safe (burden prove_safe) and failed with its figure on the safe side says so:
    'peak memory 24.9% of RAM (<= 40% of RAM), not shown within it (could be 44.5% of RAM)'."""
    return ", ".join(f"{label(g)} {figure_of(g, metrics[g]['measured'])} ({limit_of(g, metrics[g]['threshold'])})"
                     + (f" over the {metrics[g]['judged_over']}" if metrics[g].get("judged_over") else "")
                     + _unproven(g, metrics[g]) for g in gates)


def _unproven(gate: str, m: dict[str, Any]) -> str:
    measured, threshold = m.get("measured"), m.get("threshold")
    if m.get("burden") != "prove_safe" or measured is None or threshold is None:
        return ""
    at_least = BY_NAME[gate].direction == "min" if gate in BY_NAME else False
    if (measured < threshold) if at_least else (measured > threshold):
        return ""
    low, high = m.get("interval") or (None, None)
    bound = low if at_least else high
    return ", not shown within it" + (f" (could be {figure_of(gate, bound)})" if bound is not None else "")


def read_story(con: Any, result: dict[str, Any], config: Any) -> ReleaseStory:
    """The story of an evaluation read back from the warehouse: the stored looks with this one's (the newer of a
    day wins, so a stored evaluation reads as it was stored) and the people's actions, at its evaluation time."""
    from datetime import datetime

    from pipeline.rollout.actions import recorded
    from pipeline.rollout.previous import find

    at = datetime.fromisoformat(result["evaluated_at"].replace("Z", ""))
    states = rollout_state.current(con, result["release"], config, at, recorded(con, result["release"]), result)
    return story(result, states, config, find(con, result["release"], config))
