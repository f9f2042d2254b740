"""Alerts: one per change of a release's rollout state (pipeline/rollout/state.py), titled
by what it means for the app, never with a device id:

    kind               severity  title (after "Release R: ")
    rollback_to_cloud  critical  rollback: all 19 segments to cloud
    partial_rollback   critical  partial rollback: 5 of 19 segments to cloud
    suspect            warning   suspect: 2 of 19 segments failed a look; cloud check on until the next looks decide
    insufficient_data  warning   not enough data: 19 segments on edge_with_cloud_check until judged
    ok (after another) info      recovered: no segment rolled back any more (19 segments)   [resolves the last one]

An unchanged critical state is sent again after `alerts.repeat_interval_hours`;
nothing else repeats. `dedup_key` is the same for every alert about one
(release, segment set, state); `alert_id` also counts the release's alerts, so a
second rollback of the same segments after a recovery is a new message. Both
travel with the alert; `alert_id` is the webhook's `Idempotency-Key`.

Delivery goes through the `alerts` outbox table, at least once:
- enqueue (with the evaluation, in its transaction): one row per configured sink;
- deliver: every pending row, without holding the database or the writer lock
  while sending. A temporary failure (connection refused, timeout, 5xx, 429) is
  retried with capped exponential backoff (Retry-After honoured) inside one
  total deadline per run (`alerts.delivery_deadline_s`) and, if it persists,
  stays pending for the next run; a permanent one (other 4xx) is marked failed. The alert id travels as
  `Idempotency-Key`, so a receiver can drop the duplicate of a crash between
  its 200 and our bookkeeping.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from pipeline.common.config import Config, Sink, effective_sinks
from pipeline.common.errors import TransientError
from pipeline.common.registry import label
from pipeline.common.units import figure_of, limit_of
from pipeline.common.vocabulary import PREVIOUS_EDGE, Route, RouteCause, Status, Verdict
from pipeline.delivery import alertmanager
from pipeline.delivery.sinks import DeliveryDeadline, PermanentError, send
from pipeline.rollout import state as rollout_state
from pipeline.views.story import failed_text, group_heading, story
from pipeline.warehouse import db, handle, sqlfiles
from pipeline.warehouse.handle import Warehouse

MAX_SEGMENT_LINES = 20


def _incident(release: str, status: rollout_state.RolloutStatus) -> str:
    overrides = f"|{','.join(status.overrides)}" if status.overrides else ""
    return hashlib.sha256(f"{release}|{status.kind}|{','.join(status.segments)}{overrides}".encode()).hexdigest()[:16]


def build_alert(release: str, before: rollout_state.RolloutStatus, after: rollout_state.RolloutStatus,
                states: dict[str, Any], result: dict[str, Any], config: Config, number: int, repeat: bool = False,
                previous: Any = None) -> dict[str, Any]:
    """The alert for the move `before` -> `after` (or a repeat of `after`); `result` is the stored
    evaluation (GateResult.to_dict()) whose figures the lines quote; `number` counts earlier alerts;
    `previous`: routing.previous_edge's fallback model (rollout/previous.py)."""
    routes = rollout_state.routes(states, config, previous)
    told = story(result, states, config, previous)
    title = f"Release {release}: {rollout_state.headline(after, before, config, routes)}"
    looked = (f"judged by the intra-day look at {result['as_of']} (the day so far)"
              if rollout_state.intraday(result) else f"evaluated as of {result['as_of']}")
    lines = [title + (" (still, repeated)" if repeat else ""),
             f"{looked}: verdict {result['verdict']} ({result['note']}); routes now: "
             f"{told.routes_text()}; "
             f"see `pipeline state --release {release}`"]
    for g, c in result["release_wide"].items():
        if c["status"] == Status.FAIL and c["mode"] == "enforce":
            lines.append(f"release-wide {label(g)}: {figure_of(g, c['measured'])}, threshold "
                         f"{limit_of(g, c['threshold'])}")
    metrics = {f"{s['task']}/{s['device_tier']}/{s['network_bucket']}": s for s in result["segments"]}
    failing = []
    about = [k for k, st in sorted(states.items())
             if k != rollout_state.RELEASE and st.state in (*rollout_state.ROLLED, "suspect")]
    for key in about:
        st, seg = states[key], metrics.get(key)
        gates = [{"gate": g, "measured": seg["metrics"][g]["measured"] if seg else None,
                  "threshold": seg["metrics"][g]["threshold"] if seg else None,
                  **({"judged_over": seg["metrics"][g]["judged_over"]}
                     if seg and seg["metrics"][g].get("judged_over") else {})} for g in st.failed_gates]
        failing.append({"segment": key, "state": st.state, "since": st.since.isoformat() if st.since else None,
                        "rows": seg["rows"] if seg else 0, "gates": gates, "route": routes[key][0]})
        if routes[key][0] == PREVIOUS_EDGE:
            failing[-1]["model_id"] = previous.model_id
    for f in failing[:MAX_SEGMENT_LINES]:
        seg = metrics.get(f["segment"])  # its whole figures: failed_text says when a gate was not shown safe
        shown = failed_text(seg["metrics"] if seg else {x["gate"]: x for x in f["gates"]},
                            [x["gate"] for x in f["gates"]])
        to = (f" -> previous_edge ({f['model_id']} of release {previous.release})" if f["route"] == PREVIOUS_EDGE
              else "")
        lines.append(f"- {f['segment']} ({f['state']} since {f['since']}, {f['rows']} rows): {shown}{to}")
    if len(failing) > MAX_SEGMENT_LINES:
        lines.append(f"- ... and {len(failing) - MAX_SEGMENT_LINES} more segments")
    for route, cause, decision, members in told.groups():  # passing their own gates, yet off the edge
        if decision == Verdict.KEEP_EDGE and route != Route.EDGE and cause != RouteCause.OWN_GATES:
            lines.append(f"- {group_heading(route, cause, decision, len(members))}: "
                         + ", ".join(m.segment for m in members))
    overrides = [{"segment": k, "state": st.state, "route": routes[k][0] if k in routes else None, **st.override}
                 for k, st in sorted(states.items()) if st.override]
    for o in overrides:  # people's actions, beside the gate's own state
        waits = f"; waits: {o['waiting']}" if o["waiting"] else ""
        lines.append(f"- override {o['segment']}: {o['text']}{waits} (the gate's own state: {o['state']})")
    for k, st in sorted(states.items()):
        if st.held:
            lines.append(f"- {k} held ({st.state}): {st.held}")
    if after.severity == "critical":  # what the rollback costs and how far the launch estimates were off
        lines.append(f"ledger: pipeline ledger --release {release} (also in pipeline report --release {release})")
    incident = _incident(release, after)
    alert = {"alert_id": hashlib.sha256(f"{incident}|{number}".encode()).hexdigest()[:24], "dedup_key": incident,
             "kind": after.kind if after.kind != "ok" else "resolved", "severity": after.severity,
             "release": release, "verdict": result["verdict"], "signature": incident, "repeat": repeat,
             "evaluated_at": result["evaluated_at"], "as_of": result["as_of"], "title": title,
             "text": "\n".join(lines), "failing_segments": failing, "overrides": overrides,
             "routes": told.counts(),
             "segments": [{"segment": m.segment, "route": m.route, "cause": m.cause, "why": m.why}
                          for m in told.segments]}
    if after.kind == "ok":
        alert["resolves"] = _incident(release, before)
    return alert


def alert_for_change(con: Any, release: str, before: rollout_state.RolloutStatus, after: rollout_state.RolloutStatus,
                     states: dict[str, Any], result: dict[str, Any], config: Config,
                     now: datetime) -> dict[str, Any] | None:
    """The alert the move from `before` to `after` raises at `now`, if any."""
    from pipeline.rollout.previous import find

    number = sqlfiles.run(con, "alerts/count", {"release": release}).fetchone()[0]
    previous = find(con, release, config)
    if not before.same_as(after):
        return build_alert(release, before, after, states, result, config, number, previous=previous)
    if after.severity != "critical" or sent_recently(con, release, _incident(release, after), config, now):
        return None
    return build_alert(release, before, after, states, result, config, number, repeat=True, previous=previous)


def sent_recently(con: Any, release: str, signature: str, config: Config, now: datetime) -> bool:
    """The release's last alert had this signature and is younger than alerts.repeat_interval_hours."""
    last = sqlfiles.run(con, "alerts/last_alert", {"release": release}).fetchone()
    return bool(last and last[0] == signature
                and now - last[1] < timedelta(hours=config.alerts.repeat_interval_hours))


def sinks(config: Config) -> dict[str, Sink]:
    """The outbox's sinks by name (Alertmanager is kept in step apart: pipeline/delivery/alertmanager.py)."""
    return {s.label: s for s in effective_sinks(config.alerts) if s.kind != "alertmanager"}


def on_change(con: Any, release: str, before: rollout_state.RolloutStatus, states: dict[str, Any],
              result: dict[str, Any], config: Config, now: datetime) -> None:
    """What recording an evaluation raises (rollout.history.record_evaluation's on_change): the alert of the
    move from `before` to the states now stored, into the outbox in the recording's transaction."""
    alert = alert_for_change(con, release, before, rollout_state.status(states), states, result, config, now)
    if alert:
        enqueue(con, alert, config, now)


def enqueue(con: Any, alert: dict[str, Any], config: Config, now: datetime) -> None:
    """Put an alert (from build_alert) in the outbox, one row per sink."""
    for sink in sinks(config):
        sqlfiles.run(con, "alerts/enqueue", {
            "alert_id": alert["alert_id"], "sink": sink, "release": alert["release"], "verdict": alert["verdict"],
            "signature": alert["signature"], "severity": alert["severity"], "created_at": now,
            "payload": json.dumps(alert)})


@dataclass
class Delivery:
    delivered: list[str] = field(default_factory=list)  # "alert_id/sink"
    pending: list[str] = field(default_factory=list)  # temporary failures, retried next run
    failed: list[str] = field(default_factory=list)  # permanent failures
    errors: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)  # torn lines cut off a sink's file before appending
    synced: list[Any] = field(default_factory=list)  # alertmanager.Sync per Alertmanager sink

    def to_dict(self) -> dict[str, Any]:
        return {"delivered": len(self.delivered), "pending": len(self.pending), "failed": len(self.failed),
                "errors": self.errors, "repairs": self.repairs,
                "alertmanager": [{"sink": x.sink, "firing": x.firing, "resolved": x.resolved, "error": x.error}
                                 for x in self.synced]}

    def __str__(self) -> str:
        text = f"alerts: {len(self.delivered)} delivered, {len(self.pending)} pending, {len(self.failed)} failed"
        return text + "".join(f"\n  {e}" for e in self.errors + self.repairs)


def deliver(warehouse: Warehouse | Path, config: Config, out: TextIO | None = None) -> Delivery:
    """Send every pending alert. The writer lock is held only to read the outbox and to record the
    outcomes, never while waiting on the network; a crash in between re-sends (at least once, with
    the Idempotency-Key)."""
    out = out or sys.stdout
    wh = handle.handle_of(warehouse, "alerts")
    managers = [s for s in effective_sinks(config.alerts) if s.kind == "alertmanager"]
    now = db.utcnow()
    with wh.writing(lock_wait=0, publish=False) as con:  # a busy writer is told at once: alerts wait in the outbox
        rows = sqlfiles.run(con, "alerts/pending").fetchall()
        states = {s.label: alertmanager.firing(con, config, s, now) for s in managers}
    report, marks = Delivery(), []
    deadline = DeliveryDeadline(config.alerts.delivery_deadline_s)
    named = sinks(config)
    for alert_id, sink, payload, _attempts in rows:
        key = f"{alert_id}/{sink}"
        try:
            if sink not in named:
                raise PermanentError(f"no sink named {sink!r} in alerts.sinks any more")
            repair = send(named[sink], json.loads(payload), config, out, deadline)
            if repair:
                report.repairs.append(repair)
            report.delivered.append(key)
            marks.append((alert_id, sink, "delivered", None, db.utcnow()))
        except TransientError as exc:
            report.pending.append(key)
            report.errors.append(f"{sink}: {exc}; kept for the next run")
            marks.append((alert_id, sink, "pending", str(exc), None))
        except (PermanentError, OSError) as exc:
            report.failed.append(key)
            report.errors.append(f"{sink}: {exc}; not retried")
            marks.append((alert_id, sink, "failed", str(exc), None))
    for sink in managers:
        synced = alertmanager.sync(sink, states[sink.label], config, now, deadline)
        report.synced.append(synced)
        if synced.error:
            report.errors.append(str(synced))
    if marks:
        with wh.writing(publish=False) as con:
            for alert_id, sink, status, error, at in marks:
                sqlfiles.run(con, "alerts/mark", {"alert_id": alert_id, "sink": sink, "status": status,
                                                  "last_error": error, "delivered_at": at})
    return report
