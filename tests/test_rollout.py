"""Rollout state across evaluations, the routing derived from it, alerts on its changes,
`gate --dry-run`, triggers, history and the pending-evaluations file.

Real DuckDB files, the real evaluate path (evaluate_gate + record_evaluation, and the
`pipeline` command in subprocesses), real processes appending to the pending file."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import ROOT, query, run_cli
from test_gate import AS_OF, CONFIG, START, load, scenario

from pipeline.common.config import Rollout, load_config
from pipeline.delivery.alerts import on_change
from pipeline.gate.evaluate import evaluate_gate
from pipeline.planning.simulate import generate
from pipeline.rollout import pending
from pipeline.rollout import state as rollout_state
from pipeline.rollout.history import evaluation_row, record_evaluation
from pipeline.rollout.routing import routing_table
from pipeline.warehouse import db
from pipeline.warehouse.aggregate import use_settings


def judge(db_path: Path, config, as_of: datetime, trigger: str = "nightly"):
    with db.reading(db_path) as con:
        use_settings(con, config)
        result = evaluate_gate(con, "4.12", config, as_of=as_of, now=as_of + timedelta(hours=2))
    recorded = record_evaluation(db_path, result, config, trigger=trigger, on_change=on_change)
    return result, recorded


def with_policy(config, **policy):
    return dataclasses.replace(config, rollout=dataclasses.replace(config.rollout, **policy))


# ------------------------------------------------------------------ the state machine itself

D0 = date(2026, 11, 1)


def looks(pattern: str) -> list[rollout_state.Look]:
    """'F.P': fail on day 0, insufficient on day 1, pass on day 2."""
    kinds = {"F": ("fail", "rollback_to_cloud"), "P": ("pass", "keep_edge"), ".": ("insufficient", "insufficient_data")}
    return [rollout_state.Look(D0 + timedelta(days=i), *kinds[c], ("peak_memory",) if c == "F" else ())
            for i, c in enumerate(pattern)]


def states_along(pattern: str, policy: Rollout) -> list[str]:
    s, out = rollout_state.SegmentState("rewrite/low/normal"), []
    for look in looks(pattern):
        s = rollout_state.advance(s, look, policy)
        out.append(s.state)
    return out


def test_default_policy_rolls_back_once_and_recovers_after_dwell_and_three_passes():
    policy = CONFIG.rollout
    assert (policy.fail_looks, policy.window_looks, policy.min_dwell_days, policy.recover_looks) == (1, 1, 2, 3)
    assert states_along("PFPFPFPPPPP", policy) == [
        "ok", "rolled_back", "rolled_back", "rolled_back", "rolled_back", "rolled_back", "rolled_back",
        "recovering", "recovering", "ok", "ok"]


def test_two_of_three_goes_through_suspect_and_insufficient_looks_change_nothing():
    policy = Rollout(fail_looks=2, window_looks=3, min_dwell_days=2, recover_looks=3)
    assert states_along("FP.F", policy) == ["suspect", "suspect", "suspect", "rolled_back"]
    assert states_along("FPPP", policy) == ["suspect", "suspect", "suspect", "ok"]
    assert states_along("FPFPPPP", policy) == ["suspect", "suspect", "rolled_back", "rolled_back", "recovering",
                                               "recovering", "ok"]
    assert states_along("FPFPPF", policy)[-2:] == ["recovering", "rolled_back"]
    assert states_along("FPPFPPF", policy) == ["suspect"] * 7  # never 2 failures within 3 looks


def test_a_recovery_rule_not_stricter_than_the_failing_one_is_a_config_error(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rollout: {fail_looks: 2, window_looks: 3, recover_looks: 2}\n")
    proc = run_cli("gate", "--config", str(cfg), "--check-config")
    assert proc.returncode == 2
    assert proc.stderr == (f"pipeline gate: error: {cfg}: rollout.recover_looks (2) must exceed rollout.fail_looks "
                           "(2): recovering needs more evidence than rolling back\n")


# ------------------------------------------------------------------ routing under every verdict and state


def test_routing_under_each_verdict(tmp_path):
    post = gate_once(scenario(tmp_path / "post.duckdb", "postmortem"))
    assert post.verdict == "rollback_to_cloud"
    table = routing_table(post.to_dict(), CONFIG)
    assert table["rollout"] == "rollback_to_cloud"
    assert {r["route"] for r in table["routes"]} == {"cloud"} and len(table["routes"]) == len(post.segments)
    assert all(r["reason"].startswith("release-wide rollback") for r in table["routes"])

    part = gate_once(scenario(tmp_path / "part.duckdb", "low_tier_memory"))
    assert part.verdict == "partial_rollback"
    by = {(r["task"], r["device_tier"], r["network_bucket"]): r
          for r in routing_table(part.to_dict(), CONFIG)["routes"]}
    for s in part.segments:
        route = by[(s.task, s.device_tier, s.network_bucket)]["route"]
        expected = {"rollback_to_cloud": "cloud", "keep_edge": "edge",
                    "insufficient_data": CONFIG.routing.insufficient_data_route}[s.decision]
        assert route == expected, s.key
    assert any(s.decision == "rollback_to_cloud" for s in part.segments)

    sparse = gate_once(scenario(tmp_path / "sparse.duckdb", "sparse", rows=1_000))
    assert sparse.verdict == "insufficient_data"
    routes = {r["route"] for r in routing_table(sparse.to_dict(), CONFIG)["routes"]}
    assert routes == {CONFIG.routing.insufficient_data_route}


def gate_once(path: Path):
    with db.reading(path) as con:
        use_settings(con, CONFIG)
        return evaluate_gate(con, "4.12", CONFIG, as_of=AS_OF)


def _state(state: str, gates: tuple[str, ...] = ("peak_memory",), decision: str = "rollback_to_cloud"):
    return rollout_state.SegmentState("rewrite/low/normal", state, D0, D0, decision, D0, 0, "F", gates, "why")


@pytest.mark.parametrize("state, gates, decision, route", [
    ("ok", (), "keep_edge", "edge"),
    ("ok", (), "insufficient_data", "edge_with_cloud_check"),
    ("suspect", ("peak_memory",), "rollback_to_cloud", "edge_with_cloud_check"),
    ("rolled_back", ("peak_memory",), "rollback_to_cloud", "cloud"),
    ("rolled_back", ("fallback_rate",), "rollback_to_cloud", "edge_with_cloud_check"),
    ("recovering", ("peak_memory",), "keep_edge", "cloud"),
])
def test_routing_under_each_state(state, gates, decision, route):
    other = rollout_state.SegmentState("rewrite/mid/normal", "ok", None, D0, "keep_edge")
    states = {"rewrite/low/normal": _state(state, gates, decision), "rewrite/mid/normal": other,
              rollout_state.RELEASE: rollout_state.SegmentState(rollout_state.RELEASE, "ok", None, D0,
                                                                "partial_rollback")}
    assert rollout_state.route_for("rewrite/low/normal", states, CONFIG)[0] == route
    assert rollout_state.route_for("rewrite/mid/normal", states, CONFIG)[0] == "edge"
    states[rollout_state.RELEASE] = dataclasses.replace(_state("rolled_back", ("quality_loss",)),
                                                        segment=rollout_state.RELEASE)
    assert {rollout_state.route_for(k, states, CONFIG)[0]
            for k in ("rewrite/low/normal", "rewrite/mid/normal")} == {"cloud"}


# ------------------------------------------------------------------ over nights, through the real evaluate path


def one_day_config(tmp_path: Path):
    # kill_rate observed: on a one-day window the low tier's small segments lack rows, stay on the edge and keep
    # their kills, so kill_rate's release-wide check would roll the whole release back (tests/test_guardrails.py);
    # these tests follow one segment's state
    text = Path(CONFIG.source).read_text().replace("window_days: 14 ", "window_days: 1  ").replace(
        "kill_rate:             {mode: enforce", "kill_rate:             {mode: observe")
    (tmp_path / "one-day.yaml").write_text(text)
    config = load_config(tmp_path / "one-day.yaml")
    assert config.window_days == 1 and config.gates.kill_rate.mode == "observe"
    return config


@pytest.fixture
def nightly_config(tmp_path):
    return one_day_config(tmp_path)


FLAP = "FPFPFPPPPP"  # nights 1-6 alternate, then four healthy nights
LOW = "rewrite/low/normal"


def nights(db_path: Path, pattern: str) -> list[datetime]:
    """One day of telemetry per letter: F low_tier_memory (low tier fails memory), P healthy."""
    start = datetime(2026, 11, 10)
    for i, c in enumerate(pattern):
        load(db_path, generate("4.12", 12_000, "low_tier_memory" if c == "F" else "healthy", seed=50 + i,
                               start=start + timedelta(days=i), days=1))
    return [start + timedelta(days=i + 1) for i in range(len(pattern))]


def test_a_segment_failing_on_alternate_nights_is_rolled_back_once_then_recovers(db_path, nightly_config):
    routes, kinds = [], []
    for as_of in nights(db_path, FLAP):
        result, recorded = judge(db_path, nightly_config, as_of)
        assert result.segments and recorded.stored
        seg = next(s for s in result.segments if s.key == LOW)
        assert seg.decision == ("rollback_to_cloud" if FLAP[len(routes)] == "F" else "keep_edge")
        table = routing_table(result.to_dict(), nightly_config, recorded.states)
        routes.append(next(r["route"] for r in table["routes"] if f"{r['task']}/{r['device_tier']}/"
                           f"{r['network_bucket']}" == LOW))
        kinds.append(table["rollout"])
    # rolled back on night 1 and kept there by every failure (the last on night 5); two days later
    # (night 7) recovering, and ok after its third passing look (night 9)
    assert routes == ["cloud"] * 8 + ["edge"] * 2
    assert kinds == ["partial_rollback"] * 8 + ["ok"] * 2
    alerts = query(db_path, "SELECT payload->>'kind', severity, payload->>'title' FROM alerts "
                          "WHERE payload->>'repeat' = 'false' ORDER BY created_at")
    assert [(k, sev) for k, sev, _ in alerts] == [("partial_rollback", "critical"), ("resolved", "info")]
    # the unchanged rollback is repeated once a day (repeat_interval_hours: 24), under the same dedup_key
    repeats = query(db_path, "SELECT count(*), count(DISTINCT payload->>'dedup_key'), count(DISTINCT alert_id) "
                           "FROM alerts WHERE payload->>'repeat' = 'true'")
    assert repeats == [(7, 1, 7)]
    assert alerts[0][2].startswith("Release 4.12: partial rollback: ") and alerts[0][2].endswith(" segments to cloud")
    assert alerts[1][2].startswith("Release 4.12: recovered: no segment rolled back any more (")
    resolved = json.loads(query(db_path, "SELECT payload FROM alerts WHERE payload->>'kind' = 'resolved'")[0][0])
    first = json.loads(query(db_path, "SELECT payload FROM alerts ORDER BY created_at LIMIT 1")[0][0])
    assert resolved["resolves"] == first["dedup_key"]
    looks_of_low = query(db_path, f"SELECT outcome FROM rollout_looks WHERE segment = '{LOW}' ORDER BY day")
    assert "".join(o[0][0].upper() for o in looks_of_low) == FLAP

    proc = run_cli("state", "--db", str(db_path), "--release", "4.12", "--config", nightly_config.source, "--json")
    assert proc.returncode == 0, proc.stderr
    view = json.loads(proc.stdout)
    low = next(s for s in view["segments"] if s["segment"] == LOW)
    assert (view["status"], low["state"], low["route"]) == ("ok", "ok", "edge")
    assert low["reason"] == "passed on 2026-11-20" and low["since"] == "2026-11-19"


def test_two_evaluations_of_one_day_are_one_look(db_path, nightly_config):
    config = with_policy(nightly_config, fail_looks=2, window_looks=3)
    (as_of,) = nights(db_path, "F")
    judge(db_path, config, as_of, trigger="ci")
    _, recorded = judge(db_path, config, as_of, trigger="nightly")  # the same day: it replaces the CI look
    assert recorded.states[LOW].state == "suspect" and recorded.states[LOW].recent == "F"
    looks = query(db_path, f"SELECT count(*), min(trigger) FROM rollout_looks WHERE segment = '{LOW}'")
    assert looks == [(1, "nightly")]
    assert query(db_path, "SELECT payload->>'kind', severity FROM alerts") == [("suspect", "warning")]
    title = query(db_path, "SELECT payload->>'title' FROM alerts")[0][0]
    assert title.startswith("Release 4.12: suspect: ") and "failed a look; cloud check on" in title


# ------------------------------------------------------------------ alerts per verdict


def test_insufficient_data_alerts_as_a_warning_and_only_once(db_path):
    scenario(db_path, "sparse", rows=1_000)
    for hours in (0, 30):
        with db.reading(db_path) as con:
            use_settings(con, CONFIG)
            result = evaluate_gate(con, "4.12", CONFIG, as_of=AS_OF, now=AS_OF + timedelta(hours=hours))
        record_evaluation(db_path, result, CONFIG, on_change=on_change)
    n = len(result.segments)
    assert query(db_path, "SELECT severity, payload->>'title' FROM alerts") == [
        ("warning", f"Release 4.12: not enough data: {n} segments on edge_with_cloud_check until judged")]


def test_an_unchanged_rollback_is_repeated_after_the_interval_with_a_new_id(db_path):
    scenario(db_path, "postmortem", rows=40_000)
    for hours in (0, 1, 23, 25):
        with db.reading(db_path) as con:
            use_settings(con, CONFIG)
            result = evaluate_gate(con, "4.12", CONFIG, as_of=AS_OF, now=AS_OF + timedelta(hours=hours))
        record_evaluation(db_path, result, CONFIG, on_change=on_change)
    rows = query(db_path, "SELECT alert_id, payload->>'dedup_key', payload->>'repeat', payload->>'text' FROM alerts "
                        "ORDER BY created_at")
    assert len(rows) == 2 and rows[0][0] != rows[1][0] and rows[0][1] == rows[1][1]
    assert [r[2] for r in rows] == ["false", "true"]
    text = rows[0][3]
    assert text.splitlines()[0] == f"Release 4.12: rollback: all {len(result.segments)} segments to cloud"
    assert text.count("rollback: all") == 1  # the headline is said once


# ------------------------------------------------------------------ the command: dry run, trigger, history


def test_dry_run_stores_nothing_and_stored_runs_record_their_trigger(db_path):
    scenario(db_path, "postmortem", rows=40_000)
    base = ("gate", "--db", str(db_path), "--release", "4.12", "--as-of", "2026-11-27")
    dry = run_cli(*base, "--dry-run", env={"CI": ""})
    assert dry.returncode == 1, dry.stderr
    assert "verdict for release 4.12: ROLLBACK_TO_CLOUD" in dry.stdout
    assert "dry run: nothing stored, no alert; rollout would be: rollback: all 36 segments to cloud" in dry.stderr
    tables = "SELECT (SELECT count(*) FROM evaluations), (SELECT count(*) FROM alerts), " \
             "(SELECT count(*) FROM rollout_state)"
    assert query(db_path, tables) == [(0, 0, 0)]
    assert run_cli(*base, "--no-alerts", env={"CI": ""}).returncode == 1
    assert run_cli(*base, "--no-alerts", env={"CI": "true"}).returncode == 1
    assert run_cli(*base, "--no-alerts", "--trigger", "nightly").returncode == 1
    assert query(db_path, "SELECT trigger FROM evaluations ORDER BY evaluation_id") == [("manual",), ("ci",),
                                                                                     ("nightly",)]
    assert query(db_path, tables)[0][1] == 1  # one alert: the state did not change after the first
    hist = run_cli("history", "--db", str(db_path), "--release", "4.12", "--limit", "2", "--json")
    assert hist.returncode == 0, hist.stderr
    rows = json.loads(hist.stdout)
    assert [r["trigger"] for r in rows] == ["nightly", "ci"]
    assert rows[0]["evaluated_at"].endswith("+00:00") and rows[0]["as_of"] == "2026-11-27T00:00:00+00:00"
    state = run_cli("state", "--db", str(db_path), "--release", "4.12")
    assert state.returncode == 0, state.stderr
    assert state.stdout.splitlines()[0] == "release 4.12: rollback: all 36 segments to cloud (critical)"


# ------------------------------------------------------------------ the fallback ceiling alone


def test_fallback_ceiling_fails_without_a_cloud_baseline(db_path, tmp_path):
    table = generate("4.12", 30_000, "healthy", seed=4, start=START, days=7)
    table = table.filter(pc.not_equal(table["route"], "cloud"))
    n = table.num_rows
    fallback = pa.array([i % 100 < 41 for i in range(n)])  # 41 % of edge requests fall back
    table = table.set_column(table.column_names.index("auto_fallback"), "auto_fallback", fallback)
    load(db_path, table)
    proc = run_cli("gate", "--db", str(db_path), "--release", "4.12", "--as-of", "2026-11-27", "--json",
                   "--dry-run")
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    fb = [s["metrics"]["fallback_rate"] for s in out["segments"] if s["decision"] != "insufficient_data"]
    assert fb and all(m["status"] == "fail" and m["baseline"] is None for m in fb)
    assert all("ceiling judged alone" in m["note"] for m in fb)


# ------------------------------------------------------------------ the pending-evaluations file

APPENDER = """
import sys
from pathlib import Path
from pipeline.rollout import pending
db, n = Path(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    pending.append(db, {"evaluation_uid": f"u{i:05d}", "release": "x", "as_of": "", "evaluated_at": "",
                        "verdict": "", "result": "{}", "pad": "p" * 2000})
"""


def test_a_concurrent_append_during_folds_loses_nothing(tmp_path):
    db_path = tmp_path / "t.duckdb"
    writer = subprocess.Popen([sys.executable, "-c", APPENDER, str(db_path), "3000"], cwd=ROOT)
    seen: list[str] = []
    folds = 0
    while writer.poll() is None or pending.pending_path(db_path).exists():
        taken = pending.take(db_path)
        seen += [r["evaluation_uid"] for r in taken.rows]
        folds += bool(taken.rows)
        assert taken.rejected == 0, taken.warnings
        pending.done(taken)
    assert writer.returncode == 0
    seen += [r["evaluation_uid"] for r in pending.take(db_path).rows]
    assert seen == [f"u{i:05d}" for i in range(3000)]  # all of them, once, in order
    assert folds > 1  # the folds really ran while the other process appended


def test_a_truncated_line_is_set_aside_and_the_next_run_succeeds(db_path):
    scenario(db_path, "healthy", rows=20_000)
    with db.reading(db_path) as con:
        use_settings(con, CONFIG)
        result = evaluate_gate(con, "4.12", CONFIG, as_of=AS_OF)
    pending.append(db_path, evaluation_row(result, "nightly"))
    with pending.pending_path(db_path).open("a") as fh:
        fh.write('{"evaluation_uid": "cut", "release": "4.12", "as_of": "2026-11-2')  # the writer died here
    proc = run_cli("gate", "--db", str(db_path), "--release", "4.12", "--as-of", "2026-11-27", "--no-alerts")
    assert proc.returncode == 0, proc.stderr
    assert (f"pipeline gate: warning: {pending.pending_path(db_path)}: line 2 is not a whole evaluation; set aside in "
            f"{pending.rejected_path(db_path)}") in proc.stderr
    assert pending.rejected_path(db_path).read_text().startswith('{"evaluation_uid": "cut"')
    assert not pending.pending_path(db_path).exists()
    assert query(db_path, "SELECT trigger FROM evaluations ORDER BY evaluation_id") == [("nightly",), ("manual",)]
    again = run_cli("gate", "--db", str(db_path), "--release", "4.12", "--as-of", "2026-11-27", "--no-alerts")
    assert again.returncode == 0 and "warning" not in again.stderr
    assert query(db_path, "SELECT count(*) FROM evaluations") == [(3,)]
