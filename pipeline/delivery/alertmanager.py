"""Alertmanager (API v2), kept in step with the stored rollout states rather than sent one message per change.

Every delivery run (after `pipeline nightly` and `pipeline gate`) POSTs to `<url>/api/v2/alerts` one alert per
segment that is rolled back, recovering or suspect, and one per release rolled back as a whole, over every
release with a stored state. Labels route and group: alertname, release, task, tier, bucket, gate (the failed
gates), severity, route, and generator. An ongoing alert carries an `endsAt` `ends_after_hours` ahead (past
the next nightly run: an alert without one would resolve itself after Alertmanager's resolve_timeout) and is
re-posted each run, so an unchanged state neither disappears nor notifies again. An alert of ours that
Alertmanager still holds active but that is no longer firing (a recovered segment, a route that changed) is
re-posted with the same labels and `endsAt` now: resolved.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pipeline.common.config import Config, Sink
from pipeline.common.errors import TransientError
from pipeline.common.registry import label
from pipeline.common.vocabulary import Route
from pipeline.delivery.sinks import (
    SOURCE,
    DeliveryDeadline,
    PermanentError,
    explain_command,
    post_json,
    report_link,
)
from pipeline.rollout import state as rollout_state
from pipeline.rollout.actions import recorded
from pipeline.rollout.previous import find
from pipeline.warehouse import sqlfiles

ALERT_SEGMENT, ALERT_SUSPECT, ALERT_RELEASE = "EdgeSegmentRolledBack", "EdgeSegmentSuspect", "EdgeReleaseRolledBack"


@dataclass
class Sync:
    sink: str
    firing: int = 0
    resolved: int = 0
    error: str | None = None

    def __str__(self) -> str:
        if self.error:
            return f"{self.sink}: {self.error}"
        return f"{self.sink}: {self.firing} firing, {self.resolved} resolved"


def alerts_url(sink: Sink) -> str:
    """Alertmanager's API v2 alerts endpoint under the sink's base URL."""
    return f"{sink.url.rstrip('/')}/api/v2/alerts"


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def firing(con: Any, config: Config, sink: Sink, now: datetime) -> list[dict[str, Any]]:
    """The alerts the stored states raise now (read under the caller's connection)."""
    ends = iso(now + timedelta(hours=sink.ends_after_hours))
    out = []
    for (release,) in sqlfiles.run(con, "rollout/state_releases").fetchall():
        states = rollout_state.current(con, release, config, now, recorded(con, release))
        routes = rollout_state.routes(states, config, find(con, release, config))
        link = report_link(sink, release)
        for key, st in sorted(states.items()):
            if key == rollout_state.RELEASE:
                if not rollout_state.routed_off(st):
                    continue
                labels = {"alertname": ALERT_RELEASE, "release": release, "severity": "critical", "route": Route.CLOUD}
                summary = f"Release {release}: rolled back to the cloud as a whole ({st.state})"
            elif rollout_state.routed_off(st) or st.state == "suspect":
                task, tier, bucket = key.split("/")
                critical = rollout_state.routed_off(st)
                labels = {"alertname": ALERT_SEGMENT if critical else ALERT_SUSPECT, "release": release,
                          "task": task, "tier": tier, "bucket": bucket, "severity": "critical" if critical else
                          "warning", "route": str(routes[key][0])}
                summary = f"Release {release}, {key}: {st.state} ({routes[key][0]})"
            else:
                continue
            labels["gate"] = ",".join(sorted(st.failed_gates))
            labels["generator"] = SOURCE
            gates = ", ".join(label(g) for g in st.failed_gates) or "none recorded"
            alert: dict[str, Any] = {
                "labels": labels, "startsAt": iso(datetime.combine(st.since, datetime.min.time())) if st.since
                else iso(now), "endsAt": ends,
                "annotations": {"summary": summary, "description": f"{st.reason}; failed gates: {gates}",
                                "explain": explain_command(release, None if key == rollout_state.RELEASE else key)}}
            if st.override:  # a person's action, never to be read as the gate's own view
                labels["override"] = st.override["action"]
                alert["annotations"]["override"] = f"{st.override['text']} (the gate's own state: {st.state})"
            if link:
                alert["annotations"]["report"] = link
                alert["generatorURL"] = link
            out.append(alert)
    return out


def active(sink: Sink, config: Config) -> list[dict[str, Any]]:
    """Our alerts Alertmanager holds active (GET /api/v2/alerts, filtered on our generator label)."""
    query = urllib.parse.urlencode({"filter": f'generator="{SOURCE}"', "active": "true", "silenced": "true",
                                    "inhibited": "true", "unprocessed": "true"})
    url = f"{alerts_url(sink)}?{query}"
    try:
        with urllib.request.urlopen(url, timeout=config.alerts.webhook_timeout_s) as response:
            return json.loads(response.read())
    except (OSError, ValueError) as exc:
        raise TransientError(f"Alertmanager unreachable at {sink.url}: {getattr(exc, 'reason', exc)}") from None


def sync(sink: Sink, alerts: list[dict[str, Any]], config: Config, now: datetime,
         deadline: DeliveryDeadline) -> Sync:
    """POST the firing alerts, and resolve ours that Alertmanager holds but no longer fire."""
    report = Sync(sink.label, firing=len(alerts))
    try:
        held = active(sink, config)
        firing_keys = {tuple(sorted(a["labels"].items())) for a in alerts}
        stale = [{"labels": a["labels"], "annotations": a.get("annotations", {}), "startsAt": a["startsAt"],
                  "endsAt": iso(now), **({"generatorURL": a["generatorURL"]} if a.get("generatorURL") else {})}
                 for a in held if tuple(sorted(a["labels"].items())) not in firing_keys]
        report.resolved = len(stale)
        if alerts or stale:
            post_json(alerts_url(sink), alerts + stale, config, deadline, what="Alertmanager")
    except (TransientError, PermanentError) as exc:
        report.error = f"{exc}; the next run posts the whole state again"
    return report
