"""PagerDuty and Slack sinks against real HTTP servers on 127.0.0.1 that check each request against the
published payload rules and answer on script; the sinks' config is linted like the rest of the file."""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Callable
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import LocalHttp
from test_alerts import evaluate, postmortem_db, statuses  # noqa: F401 (fixture)
from test_gate import AS_OF

from pipeline.common.config import Sink, load_config
from pipeline.common.errors import ConfigError
from pipeline.delivery.alerts import deliver
from pipeline.delivery.sinks import pagerduty_event
from tests.conftest import run_cli

PD_SEVERITIES = ("critical", "error", "warning", "info")


def pagerduty_problems(body: dict) -> list[str]:
    """What PagerDuty's Events API v2 would refuse (developer.pagerduty.com, "Send an Alert Event")."""
    problems = []
    if not body.get("routing_key"):
        problems.append("routing_key is required")
    if body.get("event_action") not in ("trigger", "acknowledge", "resolve"):
        problems.append("event_action must be trigger, acknowledge or resolve")
    if len(body.get("dedup_key", "")) > 255:
        problems.append("dedup_key is longer than 255 characters")
    if body.get("event_action") in ("acknowledge", "resolve") and not body.get("dedup_key"):
        problems.append("dedup_key is required to acknowledge or resolve")
    if body.get("event_action") == "trigger":
        payload = body.get("payload") or {}
        for key in ("summary", "source", "severity"):
            if not payload.get(key):
                problems.append(f"payload.{key} is required")
        if len(payload.get("summary", "")) > 1024:
            problems.append("payload.summary is longer than 1024 characters")
        if payload.get("severity") not in PD_SEVERITIES:
            problems.append("payload.severity must be critical, error, warning or info")
    return problems


def slack_problems(body: dict) -> list[str]:
    """What Slack's incoming webhooks would refuse (api.slack.com, Block Kit reference limits)."""
    problems = [] if body.get("text") else ["text (the fallback) is required"]
    blocks = body.get("blocks", [])
    if len(blocks) > 50:
        problems.append("more than 50 blocks")
    for b in blocks:
        if b["type"] == "header" and (b["text"]["type"] != "plain_text" or len(b["text"]["text"]) > 150):
            problems.append("a header is plain_text of at most 150 characters")
        if b["type"] == "section" and len(b["text"]["text"]) > 3000:
            problems.append("a section's text is at most 3000 characters")
    return problems


class Service(LocalHttp):
    """An HTTP receiver that checks every request and answers from a script: a status code, or
    (code, {headers}); a request that breaks the rules gets 400 with the problems, as the real service."""

    def __init__(self, check: Callable[[dict], list[str]], script: list):
        self.script, self.accepted, self.calls, self.check = list(script), [], 0, check
        super().__init__(self.post, "/v2/enqueue")

    def post(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        self.calls += 1
        problems = self.check(body)
        action = self.script.pop(0) if self.script else 202
        code, headers = action if isinstance(action, tuple) else (action, {})
        if problems:
            code = 400
        answer = {"status": "success", "message": "Event processed"} if code < 300 else \
            {"status": "invalid event", "message": "Event object is invalid", "errors": problems or ["x"]}
        data = json.dumps(answer).encode()
        handler.send_response(code)
        for k, v in headers.items():
            handler.send_header(k, v)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        if code < 300:
            self.accepted.append(body)


@pytest.fixture
def service():
    made = []

    def make(check, script=()):
        made.append(Service(check, list(script)))
        return made[-1]

    yield make
    for s in made:
        s.close()


def with_sinks(*sinks: Sink, **alerts):
    base = load_config()
    settings = {"sinks": sinks, "webhook_backoff_s": 0.05, "webhook_timeout_s": 1.0, **alerts}
    return dataclasses.replace(base, alerts=dataclasses.replace(base.alerts, **settings))


def test_pagerduty_triggers_with_the_published_fields(postmortem_db, service, monkeypatch):  # noqa: F811
    pd = service(pagerduty_problems, [202])
    monkeypatch.setenv("TEST_PD_KEY", "R0123456789abcdef0123456789abcdef")
    config = with_sinks(Sink("pagerduty", name="oncall", url=pd.url, routing_key_env="TEST_PD_KEY",
                             report_base_url="https://reports.example/edge"))
    evaluate(postmortem_db, config, AS_OF + timedelta(hours=1))
    delivery = deliver(postmortem_db, config)
    assert (len(delivery.delivered), delivery.errors) == (1, [])
    [event] = pd.accepted
    assert event["routing_key"] == "R0123456789abcdef0123456789abcdef"
    assert event["event_action"] == "trigger" and len(event["dedup_key"]) == 16
    payload = event["payload"]
    assert payload["summary"] == "Release 4.12: rollback: all 36 segments to cloud"
    assert (payload["severity"], payload["source"], payload["component"], payload["class"]) == (
        "critical", "edge-telemetry-pipeline", "release 4.12", "rollback_to_cloud")
    failing = payload["custom_details"]["failing_segments"]
    assert failing and all(g["threshold"] is not None for f in failing for g in f["gates"])
    assert event["links"] == [{"href": "https://reports.example/edge/report-4.12.html",
                               "text": "release 4.12 report"}]
    # a recovery resolves the key it triggered
    resolved = {"kind": "resolved", "resolves": event["dedup_key"]}
    assert pagerduty_event(resolved, config.alerts.sinks[0], "k") == {
        "routing_key": "k", "event_action": "resolve", "dedup_key": event["dedup_key"]}


def test_pagerduty_400_is_permanent_429_and_500_are_retried(postmortem_db, service, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TEST_PD_KEY", "k" * 32)
    pd = service(pagerduty_problems, [400])
    config = with_sinks(Sink("pagerduty", url=pd.url, routing_key_env="TEST_PD_KEY"))
    evaluate(postmortem_db, config, AS_OF + timedelta(hours=1))
    delivery = deliver(postmortem_db, config)
    assert pd.calls == 1 and len(delivery.failed) == 1
    assert delivery.errors == ["pagerduty: PagerDuty answered 400 Bad Request: Event object is invalid; x; "
                               "not retried"]
    assert statuses(postmortem_db)[-1][0] == "failed"


def test_pagerduty_throttled_then_accepted_within_the_deadline(postmortem_db, service, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TEST_PD_KEY", "k" * 32)
    pd = service(pagerduty_problems, [(429, {"Retry-After": "1"}), 500, 202])
    config = with_sinks(Sink("pagerduty", url=pd.url, routing_key_env="TEST_PD_KEY"))
    evaluate(postmortem_db, config, AS_OF + timedelta(hours=1))
    t = time.monotonic()
    delivery = deliver(postmortem_db, config)
    assert (pd.calls, len(delivery.delivered), delivery.errors) == (3, 1, [])
    assert time.monotonic() - t >= 1.0  # Retry-After honoured


def test_pagerduty_past_the_deadline_waits_for_the_next_run(postmortem_db, service, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TEST_PD_KEY", "k" * 32)
    pd = service(pagerduty_problems, [(429, {"Retry-After": "30"})])
    config = with_sinks(Sink("pagerduty", url=pd.url, routing_key_env="TEST_PD_KEY"), delivery_deadline_s=2.0)
    evaluate(postmortem_db, config, AS_OF + timedelta(hours=1))
    delivery = deliver(postmortem_db, config)
    assert pd.calls == 1 and len(delivery.pending) == 1
    assert "Retry-After 30 s; waiting 30 s more would pass the delivery deadline of 2 s" in delivery.errors[0]
    assert statuses(postmortem_db)[-1][0] == "pending"


def test_pagerduty_without_its_key_says_which_variable(postmortem_db, service, monkeypatch):  # noqa: F811
    monkeypatch.delenv("TEST_PD_KEY", raising=False)
    pd = service(pagerduty_problems)
    config = with_sinks(Sink("pagerduty", name="pd", url=pd.url, routing_key_env="TEST_PD_KEY"))
    evaluate(postmortem_db, config, AS_OF + timedelta(hours=1))
    delivery = deliver(postmortem_db, config)
    assert pd.calls == 0
    assert delivery.errors == ["pd: PagerDuty sink 'pd': the environment variable TEST_PD_KEY (alerts.sinks "
                               "routing_key_env) is not set; not retried"]


def test_slack_gets_block_kit_with_the_text_as_fallback(postmortem_db, service):  # noqa: F811
    slack = service(slack_problems, [200])
    config = with_sinks(Sink("slack", url=slack.url), Sink("stdout"))
    evaluate(postmortem_db, config, AS_OF + timedelta(hours=1))
    out = io.StringIO()
    delivery = deliver(postmortem_db, config, out=out)
    assert (len(delivery.delivered), delivery.errors) == (2, [])
    [message] = slack.accepted
    assert message["text"] == out.getvalue().rstrip("\n")  # the fallback is the alert's own text
    header, verdict, segments, context = message["blocks"]
    assert header["text"]["text"] == "Release 4.12: rollback: all 36 segments to cloud"
    assert "*verdict* `rollback_to_cloud`" in verdict["text"]["text"]
    assert segments["text"]["text"].startswith("• `")
    assert segments["text"]["text"].splitlines()[-1].startswith("… and ")
    assert context["elements"][0]["text"].startswith("`pipeline explain --release 4.12 --segment ")


@pytest.mark.parametrize(("sinks", "message"), [
    ("[{kind: teams, url: 'https://x'}]", "alerts.sinks[0].kind must be one of stdout, jsonl, webhook, slack, "
                                          "alertmanager, pagerduty, got 'teams'"),
    ("[{kind: slack}]", "alerts.sinks[0].url is required for a sink of kind slack"),
    ("[{kind: alertmanager, url: 'localhost:9093'}]", "alerts.sinks[0].url must be an http:// or https:// URL"),
    ("[{kind: pagerduty}]", "alerts.sinks[0].routing_key_env is required for a sink of kind pagerduty"),
    ("[{kind: stdout}, {kind: stdout}]", "alerts.sinks[1]: a second sink named 'stdout'; give each a `name`"),
    ("[{kind: webhook, url: 'https://x', routing_key: abc}]", "unknown key 'alerts.sinks[0].routing_key'"),
])
def test_the_loader_lints_sinks(tmp_path: Path, sinks: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"alerts:\n  sinks: {sinks}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert message in str(err.value)
    done = run_cli("gate", "--check-config", "--config", str(path))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_the_older_keys_still_work_and_clash_with_sinks_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("alerts:\n  stdout: false\n  jsonl_path: alerts.jsonl\n")
    from pipeline.common.config import effective_sinks

    assert effective_sinks(load_config(path).alerts) == (Sink("jsonl", path="alerts.jsonl"),)
    path.write_text("alerts:\n  jsonl_path: alerts.jsonl\n  sinks: [{kind: stdout}]\n")
    with pytest.raises(ConfigError, match=r"alerts.jsonl_path and alerts.sinks both name receivers; list it in "
                                          r"alerts.sinks instead: - \{kind: jsonl, path: 'alerts.jsonl'\}"):
        load_config(path)
