"""The receivers of an alert (gates/admission.yaml `alerts.sinks`): what each one gets, and the one HTTP POST
with retries they share. The outbox (pipeline/delivery/alerts.py) calls send() once per (alert, sink);
Alertmanager is kept in step by pipeline/delivery/alertmanager.py instead.

- stdout: the alert's text; jsonl: the alert as one JSON line; webhook: the alert as JSON (`text` inside).
- slack: a Block Kit message (header, the verdict, the failing segments, the explain command) with `text` as
  the fallback other incoming-webhook receivers read.
- pagerduty: an Events API v2 event. A critical or warning alert triggers its `dedup_key`, a recovery
  resolves the key it `resolves`; an `ok` with nothing to resolve is not sent. 202 is accepted, 400 is
  permanent (PagerDuty's own message is kept), 429 and 5xx are retried within the delivery deadline.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, TextIO

from pipeline.common.appendlog import append_line
from pipeline.common.config import PAGERDUTY_EVENTS_URL, Config, Sink
from pipeline.common.errors import TransientError

MAX_BACKOFF_S = 30.0
SOURCE = "edge-telemetry-pipeline"  # the generator every receiver sees
PD_SUMMARY_MAX, PD_DEDUP_MAX = 1024, 255  # PagerDuty Events API v2 limits
PD_SEVERITIES = {"critical": "critical", "warning": "warning", "info": "info"}
SLACK_HEADER_MAX, SLACK_TEXT_MAX = 150, 3000  # Block Kit: header plain_text, section mrkdwn
SLACK_SEGMENTS = 10  # failing segments listed in a Slack message; the rest are counted


class PermanentError(Exception):
    pass


class DeliveryDeadline:
    """The time one delivery run may spend on the network (`alerts.delivery_deadline_s`), and the moment
    before which a receiver asked not to be called again (Retry-After, or our backoff)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.not_before = 0.0
        self.why = ""  # what set not_before, for the alerts that then are not even tried

    def left(self) -> float:
        return self.ends - time.monotonic()


def post_json(url: str, body: Any, config: Config, deadline: DeliveryDeadline | None = None,
              key: str | None = None, what: str = "webhook") -> bytes:
    """POST with retries of temporary failures inside the run's deadline; the answer's body, or TransientError /
    PermanentError naming `what`. Retry-After is honoured; when it points past the deadline, the alert waits
    for the next run. `key` travels as Idempotency-Key."""
    a = config.alerts
    deadline = deadline or DeliveryDeadline(math.inf)
    data = json.dumps(body).encode()
    delay, problem = a.webhook_backoff_s, f"not sent: {deadline.why}" if deadline.why else "not sent"
    headers = {"Content-Type": "application/json", **({"Idempotency-Key": key} if key else {})}
    for attempt in range(a.webhook_retries + 1):
        hold = deadline.not_before - time.monotonic()
        if hold > deadline.left():
            raise TransientError(f"{problem}; waiting {math.ceil(hold)} s more would pass the delivery deadline "
                                 f"of {deadline.seconds:g} s (alerts.delivery_deadline_s)")
        if hold > 0:
            time.sleep(hold)
        left = deadline.left()
        if left <= 0:
            raise TransientError(f"{problem}; the delivery deadline of {deadline.seconds:g} s passed "
                                 "(alerts.delivery_deadline_s)")
        request = urllib.request.Request(url, data=data, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=min(a.webhook_timeout_s, left)) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            said = _said(exc)
            if exc.code != 429 and exc.code < 500:
                raise PermanentError(f"{what} answered {exc.code} {exc.reason}{said}") from None
            problem = f"{what} answered {exc.code} {exc.reason}{said}"
            retry_after = exc.headers.get("Retry-After", "") if exc.headers else ""
            if retry_after.isdigit():
                problem += f" with Retry-After {retry_after} s"
                deadline.not_before, deadline.why = time.monotonic() + float(retry_after), problem
                continue
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            problem = f"{what} unreachable: {getattr(exc, 'reason', exc)}"
        if attempt < a.webhook_retries:
            deadline.not_before, deadline.why = time.monotonic() + min(delay, MAX_BACKOFF_S), problem
            delay *= 2
    raise TransientError(f"{problem} (after {a.webhook_retries + 1} attempts)")


def _said(exc: urllib.error.HTTPError) -> str:
    """The receiver's own words on an error (PagerDuty: its message and errors), one line, short."""
    try:
        text = exc.read().decode(errors="replace").strip()
    except OSError:
        return ""
    try:
        body = json.loads(text)
        text = "; ".join(str(x) for x in [body.get("message"), *body.get("errors", [])] if x) \
            if isinstance(body, dict) else text
    except ValueError:
        pass
    text = " ".join(text.split())
    return f": {text[:200]}" if text else ""


def request(sink: Sink, alert: dict[str, Any], key: str | None = None) -> tuple[str, Any] | None:
    """The URL and JSON body an HTTP sink gets for `alert` (None: nothing to send, or not an HTTP sink);
    `key`: PagerDuty's routing key in place of the one the environment holds (a dry run shows no secret)."""
    if sink.kind == "webhook":
        return sink.url, alert
    if sink.kind == "slack":
        return sink.url, slack_message(alert, sink)
    if sink.kind == "pagerduty":
        event = pagerduty_event(alert, sink, key or routing_key(sink))
        return (sink.url or PAGERDUTY_EVENTS_URL, event) if event is not None else None
    return None


def send(sink: Sink, alert: dict[str, Any], config: Config, out: TextIO, deadline: DeliveryDeadline) -> str | None:
    """Deliver one alert to one sink; a repair made on the way (a torn JSONL tail) comes back as text."""
    if sink.kind == "stdout":
        print(alert["text"], file=out)
    elif sink.kind == "jsonl":
        return append_line(Path(sink.path), json.dumps(alert).encode())
    elif sink.kind in ("webhook", "slack", "pagerduty"):
        sent = request(sink, alert)
        if sent is not None:
            post_json(*sent, config, deadline, key=alert["alert_id"] if sink.kind != "pagerduty" else None,
                      what={"webhook": "webhook", "slack": "Slack", "pagerduty": "PagerDuty"}[sink.kind])
    else:
        raise PermanentError(f"sink {sink.label!r} of kind {sink.kind} is not sent through the outbox")
    return None


def routing_key(sink: Sink) -> str:
    key = os.environ.get(sink.routing_key_env, "")
    if not key:
        raise PermanentError(f"PagerDuty sink {sink.label!r}: the environment variable {sink.routing_key_env} "
                             "(alerts.sinks routing_key_env) is not set")
    return key


def report_link(sink: Sink, release: str) -> str | None:
    return f"{sink.report_base_url.rstrip('/')}/report-{release}.html" if sink.report_base_url else None


def explain_command(release: str, segment: str | None) -> str:
    return f"pipeline explain --release {release} --segment {segment}" if segment else \
        f"pipeline state --release {release}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pagerduty_event(alert: dict[str, Any], sink: Sink, key: str) -> dict[str, Any] | None:
    """The Events API v2 event of an alert (None: nothing to page or resolve)."""
    if alert["kind"] == "resolved":
        if not alert.get("resolves"):
            return None
        return {"routing_key": key, "event_action": "resolve", "dedup_key": alert["resolves"][:PD_DEDUP_MAX]}
    failing = alert.get("failing_segments", [])
    details = {"release": alert["release"], "verdict": alert["verdict"], "kind": alert["kind"],
               "failing_segments": [{"segment": f["segment"], "state": f["state"], "route": f.get("route"),
                                     "gates": f["gates"]} for f in failing],
               "explain": explain_command(alert["release"], failing[0]["segment"] if failing else None)}
    event: dict[str, Any] = {
        "routing_key": key, "event_action": "trigger", "dedup_key": alert["dedup_key"][:PD_DEDUP_MAX],
        "payload": {"summary": _cut(alert["title"] + ("" if not alert.get("repeat") else " (still)"), PD_SUMMARY_MAX),
                    "severity": PD_SEVERITIES.get(alert["severity"], "warning"), "source": SOURCE,
                    "component": f"release {alert['release']}", "group": "edge-rollout", "class": alert["kind"],
                    "custom_details": details}}
    link = report_link(sink, alert["release"])
    if link:
        event["links"] = [{"href": link, "text": f"release {alert['release']} report"}]
    return event


def slack_message(alert: dict[str, Any], sink: Sink) -> dict[str, Any]:
    """Block Kit, with `text` as the fallback (notifications, and receivers that read only `text`)."""
    failing = alert.get("failing_segments", [])
    lines = [f"• `{f['segment']}` {f['state']}" + (f" → {f['route']}" if f.get("route") else "") + ": "
             + ", ".join(g["gate"] for g in f["gates"]) for f in failing[:SLACK_SEGMENTS]]
    if len(failing) > SLACK_SEGMENTS:
        lines.append(f"… and {len(failing) - SLACK_SEGMENTS} more segments")
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(alert["title"], SLACK_HEADER_MAX)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(
            f"*verdict* `{alert['verdict']}` · *severity* {alert['severity']} · as of {alert['as_of']}",
            SLACK_TEXT_MAX)}}]
    if lines:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut("\n".join(lines), SLACK_TEXT_MAX)}})
    context = f"`{explain_command(alert['release'], failing[0]['segment'] if failing else None)}`"
    link = report_link(sink, alert["release"])
    if link:
        context += f" · <{link}|report>"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    return {"text": alert["text"], "blocks": blocks}
