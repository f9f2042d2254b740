"""Alert delivery against a real HTTP server on 127.0.0.1, through the outbox."""

from __future__ import annotations

import dataclasses
import io
import json
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler

import duckdb
import pytest
from conftest import LocalHttp, free_port
from test_gate import AS_OF, START, load

from pipeline.common.config import load_config
from pipeline.delivery.alerts import deliver, on_change
from pipeline.gate.evaluate import evaluate_gate
from pipeline.planning.simulate import generate
from pipeline.rollout.history import record_evaluation
from pipeline.warehouse import db
from pipeline.warehouse.aggregate import use_settings


class Receiver(LocalHttp):
    """A webhook receiver that answers from a script: codes, or 'sleep' to time out."""

    def __init__(self, script: list):
        self.script, self.received, self.calls = list(script), [], 0
        super().__init__(self.post, "/hook")

    def post(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        self.calls += 1
        action = self.script.pop(0) if self.script else 200
        if action == "sleep":
            time.sleep(1.5)
            action = 200
        handler.send_response(action)
        handler.end_headers()
        if action == 200:
            self.received.append((handler.headers["Idempotency-Key"], body))


@pytest.fixture
def receiver():
    made = []

    def make(script=()):
        made.append(Receiver(list(script)))
        return made[-1]

    yield make
    for r in made:
        r.close()


def config_for(url: str, **alerts):
    base = load_config()
    settings = {"webhook_url": url, "stdout": False, "webhook_backoff_s": 0.05, "webhook_timeout_s": 0.5, **alerts}
    return dataclasses.replace(base, alerts=dataclasses.replace(base.alerts, **settings))


def evaluate(db_path, config, now):
    with db.reading(db_path) as con:
        use_settings(con, config)
        result = evaluate_gate(con, "4.12", config, as_of=AS_OF, now=now)
    record_evaluation(db_path, result, config, on_change=on_change)
    return result


def statuses(db_path):
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute("SELECT status, attempts FROM alerts ORDER BY created_at").fetchall()
    finally:
        con.close()


@pytest.fixture
def postmortem_db(db_path):
    return load(db_path, generate("4.12", 40_000, "postmortem", seed=2, start=START, days=7))


def test_delivery_posts_text_and_numbers_without_device_ids(postmortem_db, receiver):
    hook = receiver()
    config = config_for(hook.url)
    evaluate(postmortem_db, config, AS_OF)
    report = deliver(postmortem_db, config)
    assert (len(report.delivered), report.pending, report.failed) == (1, [], [])
    key, body = hook.received[0]
    assert key == body["alert_id"] and body["severity"] == "critical"
    assert body["text"].startswith("Release 4.12: rollback: all 36 segments to cloud\n")
    assert body["kind"] == "rollback_to_cloud" and body["routes"] == {"cloud": 36}
    assert "release-wide quality loss: 15.9%, threshold <= 3%" in body["text"]  # 0.15 + its low-tier kills
    assert "thermal 10.8 °C (<= 5.0 °C)" in body["text"]  # each figure in its unit, as the terminal says it
    con = duckdb.connect(str(postmortem_db), read_only=True)
    devices = {d for (d,) in con.execute("SELECT DISTINCT device_id FROM events").fetchall()}
    con.close()
    sent = json.dumps(body)
    assert "device_id" not in sent and not [d for d in devices if d in sent]
    assert statuses(postmortem_db) == [("delivered", 1)]


def test_a_500_then_success_is_retried_within_the_run(postmortem_db, receiver):
    hook = receiver([500, 503])
    config = config_for(hook.url)
    evaluate(postmortem_db, config, AS_OF)
    report = deliver(postmortem_db, config)
    assert len(report.delivered) == 1 and hook.calls == 3 and len(hook.received) == 1


def test_a_timeout_is_temporary_and_kept_for_the_next_run(postmortem_db, receiver):
    hook = receiver(["sleep", "sleep"])
    config = config_for(hook.url, webhook_retries=1)
    evaluate(postmortem_db, config, AS_OF)
    report = deliver(postmortem_db, config)
    assert report.pending and "timed out" in report.errors[0]
    assert statuses(postmortem_db) == [("pending", 1)]
    assert len(deliver(postmortem_db, config).delivered) == 1  # the server answers in time now
    assert deliver(postmortem_db, config).delivered == []


def test_a_server_down_for_one_run_gets_the_alert_once_on_the_next(postmortem_db, receiver):
    config = config_for(f"http://127.0.0.1:{free_port()}/hook", webhook_retries=1)  # nothing listens there
    evaluate(postmortem_db, config, AS_OF)
    first = deliver(postmortem_db, config)
    assert first.pending and "unreachable" in first.errors[0]
    hook = receiver()
    moved = dataclasses.replace(config, alerts=dataclasses.replace(config.alerts, webhook_url=hook.url))
    assert len(deliver(postmortem_db, moved).delivered) == 1
    assert deliver(postmortem_db, moved).delivered == []
    assert len(hook.received) == 1


def test_a_4xx_is_permanent_and_not_retried(postmortem_db, receiver):
    hook = receiver([400])
    config = config_for(hook.url)
    evaluate(postmortem_db, config, AS_OF)
    report = deliver(postmortem_db, config)
    assert report.failed and hook.calls == 1 and "not retried" in report.errors[0]
    assert deliver(postmortem_db, config).failed == []


def test_same_verdict_not_resent_within_the_repeat_interval(postmortem_db, receiver):
    hook = receiver()
    config = config_for(hook.url, repeat_interval_hours=24)
    for hours in (0, 1, 23):
        evaluate(postmortem_db, config, AS_OF + timedelta(hours=hours))
        deliver(postmortem_db, config)
    assert len(hook.received) == 1
    evaluate(postmortem_db, config, AS_OF + timedelta(hours=25))
    deliver(postmortem_db, config)
    assert len(hook.received) == 2


def test_stdout_and_jsonl_sinks(postmortem_db, tmp_path):
    config = config_for("", stdout=True, jsonl_path=str(tmp_path / "alerts.jsonl"))
    evaluate(postmortem_db, config, datetime(2026, 11, 27, 2))
    out = io.StringIO()
    report = deliver(postmortem_db, config, out=out)
    assert len(report.delivered) == 2
    assert out.getvalue().startswith("Release 4.12: rollback: all 36 segments to cloud\n")
    line = json.loads((tmp_path / "alerts.jsonl").read_text())
    assert line["verdict"] == "rollback_to_cloud" and line["failing_segments"]


def test_a_jsonl_append_killed_midway_costs_no_later_alert(postmortem_db, tmp_path):
    """A process killed (SIGKILL) after writing half of its alert line leaves a torn tail; the next delivery
    cuts it off into alerts.jsonl.torn, says so, and its own alert is a whole, parseable line."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "alerts.jsonl"
    path.write_text('{"alert_id": "earlier", "verdict": "keep_edge"}\n')
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
        "os.write(fd, b'{\"alert_id\": \"torn\", \"verdict\": \"rollb')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"), str(path)])
    assert killed.returncode == -signal.SIGKILL
    config = config_for("", stdout=False, jsonl_path=str(path))
    evaluate(postmortem_db, config, datetime(2026, 11, 27, 2))
    report = deliver(postmortem_db, config)
    assert len(report.delivered) == 1 and report.errors == []
    assert report.repairs == [f"{path}: its last line was cut short by an interrupted append (38 bytes, not a whole "
                              f"record); moved to {path}.torn before appending"]
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert [ln["alert_id"] for ln in lines][0] == "earlier" and lines[1]["verdict"] == "rollback_to_cloud"
    assert (tmp_path / "alerts.jsonl.torn").read_bytes() == b'{"alert_id": "torn", "verdict": "rollb\n'
