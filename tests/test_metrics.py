"""What on-call plugs in: `pipeline metrics` for node_exporter's textfile collector (checked by promtool, the
last success not advancing when a run fails), `pipeline alerts test`, and the README's Alertmanager route and
Prometheus rule (checked by amtool and promtool)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from conftest import ROOT, program, run_cli
from test_sinks import Service, pagerduty_problems, slack_problems

from pipeline.common.config import DEFAULT_CONFIG


def _metrics(text: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\S+) (\S+)$", text, re.M)}


def _config(tmp_path: Path, sinks: str, textfile: Path | None = None) -> Path:
    text = DEFAULT_CONFIG.read_text().replace("  stdout: true\n", f"  stdout: true\n  sinks: {sinks}\n")
    if textfile:
        assert '  textfile: ""' in text
        text = text.replace('  textfile: ""', f'  textfile: "{textfile}"')
    path = tmp_path / "admission.yaml"
    path.write_text(text)
    return path


def test_nightly_writes_metrics_promtool_accepts_and_a_failed_run_keeps_the_last_success(tmp_path: Path) -> None:
    prom = tmp_path / "textfile" / "edge_pipeline.prom"
    good = _config(tmp_path, f"[{{kind: jsonl, path: '{tmp_path / 'alerts.jsonl'}'}}]", prom)
    db_file = str(tmp_path / "t.duckdb")
    before = time.time()
    done = run_cli("nightly", "--landing", str(ROOT / "sample_logs"), "--db", db_file, "--config", str(good),
                   "--as-of", "2026-12-01")
    after = time.time()
    assert done.returncode == 0, done.stderr
    check = subprocess.run([program("promtool"), "check", "metrics"], input=prom.read_text(), capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    first = _metrics(prom.read_text())
    # bookkeeping is on the wall clock, whatever --as-of judged by (else the staleness rule fires after a backfill)
    assert before - 1 <= first["edge_pipeline_last_success_timestamp_seconds"] <= after + 1
    assert 0.5 < first["edge_pipeline_last_run_duration_seconds"] <= after - before + 1
    shown = json.loads(run_cli("runs", "--db", db_file, "--format", "json").stdout)
    assert shown[0]["as_of"].startswith("2026-12-01") and shown[0]["status"] == "ok", shown
    started, finished = (datetime.fromisoformat(shown[0][k]).replace(tzinfo=UTC).timestamp()
                         for k in ("started_at", "finished_at"))
    assert before - 1 <= started < finished <= after + 1
    assert first["edge_pipeline_last_run_ok"] == 1.0
    assert (first["edge_pipeline_rows_read_total"], first["edge_pipeline_rows_loaded_total"],
            first["edge_pipeline_rows_quarantined_total"], first["edge_pipeline_rows_duplicated_total"]) == (
        36000.0, 35983.0, 17.0, 0.0)
    assert first['edge_pipeline_segments{decision="rollback_to_cloud",release="4.12"}'] == 12.0
    assert first['edge_pipeline_alert_deliveries{sink="jsonl",status="delivered"}'] == 1.0
    # the archive step: nothing is 45 days old yet; the sizes it measured
    assert (first["edge_pipeline_archived_events_rows_total"], first["edge_pipeline_archived_events_partitions"],
            first["edge_pipeline_archived_quarantine_rows_total"], first["edge_pipeline_archive_bytes"]) == (0, 0, 0, 0)
    assert first["edge_pipeline_warehouse_bytes"] >= Path(db_file).stat().st_size
    # a night whose alert cannot be delivered fails: the file is rewritten, its last success is not
    down = _config(tmp_path, "[{kind: webhook, url: 'http://127.0.0.1:9/hook'}]", prom)
    text = down.read_text().replace("delivery_deadline_s: 60", "delivery_deadline_s: 1")
    down.write_text(text.replace("repeat_interval_hours: 24", "repeat_interval_hours: 0"))
    failed = run_cli("nightly", "--landing", str(ROOT / "sample_logs"), "--db", db_file, "--config", str(down),
                     "--as-of", "2026-12-02")
    assert failed.returncode == 2, failed.stdout + failed.stderr
    second = _metrics(prom.read_text())
    assert second["edge_pipeline_last_run_ok"] == 0.0
    assert second["edge_pipeline_last_success_timestamp_seconds"] == first[
        "edge_pipeline_last_success_timestamp_seconds"]
    assert second['edge_pipeline_alert_deliveries{sink="webhook",status="pending"}'] >= 1.0
    shown = run_cli("metrics", "--db", db_file)
    assert shown.returncode == 0 and shown.stdout == prom.read_text()


def test_alerts_test_sends_a_marked_alert_and_says_which_sink_failed(tmp_path: Path, monkeypatch) -> None:
    slack, pd = Service(slack_problems, [200]), Service(pagerduty_problems, [400])
    try:
        config = _config(tmp_path, f"[{{kind: slack, url: '{slack.url}'}}, {{kind: pagerduty, name: oncall, "
                                   f"url: '{pd.url}', routing_key_env: TEST_PD_KEY}}]")
        dry = run_cli("alerts", "test", "--dry-run", "--config", str(config))
        assert dry.returncode == 0, dry.stderr
        assert "# oncall (pagerduty)\nPOST " + pd.url in dry.stdout
        assert '"routing_key": "$TEST_PD_KEY"' in dry.stdout  # the variable's name, never a secret
        assert slack.calls == pd.calls == 0  # a dry run sends nothing
        sent = run_cli("alerts", "test", "--config", str(config), env={"TEST_PD_KEY": "k" * 32})
        assert sent.returncode == 5, sent.stdout + sent.stderr
        assert f"slack: ok: test alert delivered ({slack.url})" in sent.stdout
        assert sent.stderr.strip() == ("oncall: FAILED: PagerDuty answered 400 Bad Request: Event object is invalid;"
                                       " x")
        [message] = slack.accepted
        assert message["blocks"][0]["text"]["text"].startswith("TEST alert from `pipeline alerts test`")
        only = run_cli("alerts", "test", "--sink", "slack", "--config", str(config))
        assert only.returncode == 0 and pd.calls == 1
    finally:
        slack.close()
        pd.close()


def _block(after: str) -> str:
    """The YAML block of README.md whose first line is `after`."""
    text = (ROOT / "README.md").read_text()
    start = text.index(f"```yaml\n{after}\n")
    return text[start + len("```yaml\n"): text.index("```", start + 7)]


def test_the_readmes_alertmanager_route_and_prometheus_rule_check(tmp_path: Path) -> None:
    route = tmp_path / "alertmanager.yml"
    route.write_text(_block("# alertmanager.yml"))
    done = subprocess.run([program("amtool"), "check-config", str(route)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rules = tmp_path / "rules.yml"
    rules.write_text(_block("# prometheus rules"))
    done = subprocess.run([program("promtool"), "check", "rules", str(rules)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rules found" in done.stdout
    test = tmp_path / "test.yml"  # the rule fires on a metric a day and a bit old, not before
    test.write_text(json.dumps({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1h", "input_series": [{"series": "edge_pipeline_last_success_timestamp_seconds",
                                            "values": "0x30"}],
        "alert_rule_test": [{"eval_time": "25h", "alertname": "EdgePipelineNightlyStale", "exp_alerts": []},
                            {"eval_time": "27h", "alertname": "EdgePipelineNightlyStale", "exp_alerts": [
                                {"exp_labels": {"severity": "critical"}, "exp_annotations": {
                                    "summary": "the edge telemetry nightly job has not succeeded for over a day"}}]}],
    }]}))
    done = subprocess.run([program("promtool"), "test", "rules", str(test)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
