"""A real Alertmanager (Debian's prometheus-alertmanager) on 127.0.0.1, fed by `pipeline nightly` over two
releases and several nights: a rollback fires exactly the alerts the stored states say, grouped by release,
an unchanged state stays active without a second alert, and a recovery resolves them."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import free_port, program, run_cli, wait_until

from pipeline.common.config import DEFAULT_CONFIG
from pipeline.planning.simulate import Population, generate
from pipeline.rollout import state as rollout_state
from pipeline.warehouse import db

D0 = datetime(2026, 11, 20)
AM_CONFIG = """route:
  receiver: blackhole
  group_by: [release]
  group_wait: 1s
  group_interval: 1s
receivers:
  - name: blackhole
"""


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture
def alertmanager(tmp_path: Path):
    (tmp_path / "am.yml").write_text(AM_CONFIG)
    check = subprocess.run([program("amtool"), "check-config", str(tmp_path / "am.yml")], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    proc = subprocess.Popen([program("prometheus-alertmanager"), f"--config.file={tmp_path / 'am.yml'}",
                             f"--storage.path={tmp_path / 'am-data'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--cluster.listen-address="], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    wait_until(ready, 20, "Alertmanager ready")
    yield url
    proc.terminate()
    proc.wait(10)


def _ours(url: str) -> list[dict]:
    return _get(f'{url}/api/v2/alerts?filter=generator%3D%22edge-telemetry-pipeline%22')


def _expected(path: Path) -> set[tuple]:
    """(alertname, release, segment) of every alert the stored states raise."""
    out = set()
    with db.reading(path) as con:
        for release in ("9.1", "9.2"):
            for key, st in rollout_state.stored_states(con, release).items():
                if key == rollout_state.RELEASE and st.state in rollout_state.ROLLED:
                    out.add(("EdgeReleaseRolledBack", release, None))
                elif key != rollout_state.RELEASE and st.state in (*rollout_state.ROLLED, "suspect"):
                    name = "EdgeSegmentRolledBack" if st.state in rollout_state.ROLLED else "EdgeSegmentSuspect"
                    out.add((name, release, key))
    return out


def _held(alerts: list[dict]) -> set[tuple]:
    return {(a["labels"]["alertname"], a["labels"]["release"],
             "/".join(a["labels"][k] for k in ("task", "tier", "bucket")) if "task" in a["labels"] else None)
            for a in alerts}


def test_nightly_keeps_alertmanager_in_step_with_rollback_and_recovery(alertmanager: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    config = tmp_path / "admission.yaml"
    # one day's window, and recovery after 2 passing looks (not 3): the rollback, its dwell and a recovery in 4 nights
    text = DEFAULT_CONFIG.read_text().replace("window_days: 14 ", "window_days: 1 ").replace(
        "recover_looks: 3 ", "recover_looks: 2 ").replace(
        "  stdout: true\n", f"  stdout: true\n  sinks: [{{kind: alertmanager, url: '{alertmanager}', "
                            "report_base_url: 'https://reports.example'}]\n")
    assert "window_days: 1 " in text and "recover_looks: 2 " in text and "kind: alertmanager" in text
    config.write_text(text)
    path = tmp_path / "t.duckdb"

    def night(day: int) -> None:
        """Day `day - 1`'s uploads land (9.2 bad on the first day, fixed after), then the nightly job runs."""
        for release, scenario, seed in (("9.2", "postmortem" if day == 1 else "healthy", day),
                                        ("9.1", "healthy", 100 + day)):
            # a day of a real app's traffic: most devices send a request or two (a device-day with 20 requests
            # would make the healthy ~0.1 % kills per request a kill on 2 % of device-days)
            table = generate(release, 60_000, scenario, seed, start=D0 + timedelta(days=day - 1), days=1,
                             population=Population(rows_per_device=2))
            (landing / f"release={release}").mkdir(parents=True, exist_ok=True)
            pq.write_table(table, landing / f"release={release}" / f"day-{day}.parquet")
        done = run_cli("nightly", "--landing", str(landing), "--db", str(path), "--config", str(config),
                       "--as-of", (D0 + timedelta(days=day)).date().isoformat())
        assert done.returncode in (0, 4), done.stderr

    night(1)  # judges the bad day: 9.2 rolls back, 9.1 keeps the edge
    fired = _expected(path)
    assert ("EdgeReleaseRolledBack", "9.2", None) in fired and {r for _, r, _ in fired} == {"9.2"}
    held = wait_until(lambda: _ours(alertmanager) if _held(_ours(alertmanager)) == fired else None, 10,
                      "the rollback's alerts active in Alertmanager")
    segment = next(a for a in held if a["labels"].get("task"))
    assert segment["labels"]["severity"] == "critical" and segment["labels"]["route"] == "cloud"
    assert segment["labels"]["gate"]  # the failed gates
    assert segment["annotations"]["explain"].startswith("pipeline explain --release 9.2 --segment ")
    assert segment["annotations"]["report"] == "https://reports.example/report-9.2.html"
    assert segment["endsAt"] > (datetime.utcnow() + timedelta(hours=20)).isoformat()  # past the next run
    groups = wait_until(lambda: [g for g in _get(f"{alertmanager}/api/v2/alerts/groups") if g["alerts"]] or None,
                        10, "a group")
    assert [g["labels"] for g in groups] == [{"release": "9.2"}]  # grouped as the route says
    started = {a["fingerprint"]: a["startsAt"] for a in held}

    night(2)  # the first good day: still rolled back (dwell): the same alerts, not new ones
    assert _held(_ours(alertmanager)) == _expected(path) == fired
    assert {a["fingerprint"]: a["startsAt"] for a in _ours(alertmanager)} == started

    for day in range(3, 5):
        night(day)
    left = _expected(path)
    assert len(left) < len(fired)  # segments recovered (those the good days judge)
    wait_until(lambda: _held(_ours(alertmanager)) == left or None, 10, "the recovered alerts resolved")
    amtool = subprocess.run([program("amtool"), "alert", "query", f"--alertmanager.url={alertmanager}",
                             'generator="edge-telemetry-pipeline"', "-o", "json"], capture_output=True, text=True)
    assert amtool.returncode == 0, amtool.stderr
    assert _held(json.loads(amtool.stdout)) == left


def test_a_nightly_run_that_cannot_reach_alertmanager_fails_and_says_so(tmp_path: Path) -> None:
    from tests.conftest import ROOT

    config = tmp_path / "admission.yaml"
    config.write_text(DEFAULT_CONFIG.read_text().replace(
        "  stdout: true\n", "  stdout: true\n  sinks: [{kind: alertmanager, url: 'http://127.0.0.1:9'}]\n"))
    done = run_cli("nightly", "--landing", str(ROOT / "sample_logs"), "--db", str(tmp_path / "t.duckdb"),
                   "--config", str(config), "--as-of", "2026-12-01")
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("error: TransientError: Alertmanager not kept in step: alertmanager: Alertmanager unreachable at "
            "http://127.0.0.1:9") in done.stdout
