"""`pipeline alerts test`: a clearly marked test alert to each sink (or the one named), or with --dry-run the
exact request each would get, so a team sees its receivers work before a real rollback needs them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TextIO

from pipeline.common.config import Config, Sink, effective_sinks
from pipeline.common.errors import TransientError, UsageError
from pipeline.delivery.alertmanager import alerts_url, iso
from pipeline.delivery.sinks import (
    SOURCE,
    DeliveryDeadline,
    PermanentError,
    post_json,
    request,
    send,
)

TEST_RELEASE = "test"


def test_alert(now: datetime) -> dict[str, Any]:
    """An alert every sink takes like a real one, marked TEST in every field a person reads."""
    title = "TEST alert from `pipeline alerts test`: no release changed, nothing to do"
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    key = f"edge-pipeline-test-{now:%Y%m%d%H%M%S}"
    return {"alert_id": key, "dedup_key": key, "kind": "test", "severity": "info", "release": TEST_RELEASE,
            "verdict": "test", "signature": key, "repeat": False, "evaluated_at": stamp, "as_of": stamp,
            "title": title, "text": f"{title}\nsent {stamp} to check this receiver", "failing_segments": [],
            "routes": {}}


def alertmanager_test(now: datetime) -> list[dict[str, Any]]:
    return [{"labels": {"alertname": "EdgePipelineTest", "severity": "info", "generator": SOURCE,
                        "release": TEST_RELEASE},
             "annotations": {"summary": "TEST alert from `pipeline alerts test`: nothing to do"},
             "startsAt": iso(now), "endsAt": iso(now + timedelta(minutes=5))}]


@dataclass
class Tried:
    sink: str
    ok: bool
    said: str


def chosen(config: Config, name: str | None) -> list[Sink]:
    sinks = list(effective_sinks(config.alerts))
    if name is None:
        return sinks
    match = [s for s in sinks if s.label == name]
    if not match:
        raise UsageError(f"--sink {name!r}: no such sink in alerts.sinks; sinks: "
                         f"{', '.join(s.label for s in sinks) or 'none configured'}")
    return match


def dry_run(sinks: list[Sink], now: datetime, out: TextIO) -> None:
    """The exact request (or line) each sink would get."""
    alert = test_alert(now)
    for sink in sinks:
        print(f"# {sink.label} ({sink.kind})", file=out)
        if sink.kind == "stdout":
            print(alert["text"], file=out)
        elif sink.kind == "jsonl":
            print(f"append to {sink.path}: {json.dumps(alert)}", file=out)
        elif sink.kind == "alertmanager":
            print(f"POST {alerts_url(sink)}\n{json.dumps(alertmanager_test(now), indent=1)}", file=out)
        else:  # the secret is never printed: its variable's name stands in for PagerDuty's routing key
            url, body = request(sink, alert, key=f"${sink.routing_key_env}")  # type: ignore[misc]
            print(f"POST {url}\nContent-Type: application/json\n{json.dumps(body, indent=1)}", file=out)


def send_test(sinks: list[Sink], config: Config, now: datetime, out: TextIO) -> list[Tried]:
    alert, tried = test_alert(now), []
    deadline = DeliveryDeadline(config.alerts.delivery_deadline_s)
    for sink in sinks:
        try:
            if sink.kind == "alertmanager":
                post_json(alerts_url(sink), alertmanager_test(now), config, deadline, what="Alertmanager")
            else:
                send(sink, alert, config, out, deadline)
            where = sink.path if sink.kind == "jsonl" else sink.url or sink.kind
            tried.append(Tried(sink.label, True, f"test alert delivered ({where})"))
        except (TransientError, PermanentError, OSError) as exc:
            tried.append(Tried(sink.label, False, str(exc)))
    return tried


