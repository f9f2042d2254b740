"""People act on a rollout with a reason on record (pipeline rollout pause|resume|rollback|promote), windows
(rollout.windows) and hold-mode gates, end to end over several nights: real DuckDB files, the gate's evaluate
and record path night by night (tests/test_rollout.py's harness), and the `pipeline` command for the actions
and for what people read (state, history, explain, report, the alerts' outbox)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import query, run_cli, writer_holding
from test_output_schema import _validator
from test_rollout import LOW, judge, nights, one_day_config

from pipeline.common.config import RolloutWindow, load_config
from pipeline.rollout.routing import routing_table
from pipeline.rollout.windows import hold, occurrence


@pytest.fixture
def nightly_config(tmp_path):
    return one_day_config(tmp_path)


def _cli(db: Path, config, *args: str) -> dict:
    done = run_cli(*args, "--db", str(db), "--config", config.source, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _at(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M")


def _route(result, config, states) -> tuple[str, str]:
    entry = next(r for r in routing_table(result.to_dict(), config, states)["routes"]
                 if f"{r['task']}/{r['device_tier']}/{r['network_bucket']}" == LOW)
    return entry["route"], entry["reason"]


def _low(view: dict) -> dict:
    return next(s for s in view["segments"] if s["segment"] == LOW)


def test_a_forced_rollback_routes_to_the_cloud_at_once_and_is_on_record_everywhere(db_path, nightly_config):
    cfg = nightly_config
    night = nights(db_path, "PPPP")
    for as_of in night[:2]:
        result, recorded = judge(db_path, cfg, as_of)
    assert _route(result, cfg, recorded.states)[0] == "edge"
    taken = night[1] + timedelta(hours=5)
    rollback = ("rollout", "rollback", "--release", "4.12", "--segment", LOW, "--reason", "pagerduty:INC123",
                "--actor", "pd-bot", "--no-alerts")
    out = _cli(db_path, cfg, *rollback, "--as-of", _at(taken))
    _validator("rollout").validate(out)
    assert out["outcome"] == "stored"
    assert out["action"] | {"action_id": "x"} == {
        "action_id": "x", "release": "4.12", "segment": LOW, "action": "rollback", "reason": "pagerduty:INC123",
        "actor": "pd-bot", "taken_at": "2026-11-12T05:00:00Z", "until": None, "gates": [],
        "previous": {LOW: {"state": "ok", "route": "edge", "override": None}}}
    seg = out["segments"][LOW]
    assert (seg["state"], seg["route"]) == ("ok", "cloud")  # at once; the gate's own state stays beside it
    assert seg["route_reason"].startswith("override: rolled back by pd-bot at 2026-11-12 05:00 UTC: "
                                          "pagerduty:INC123 (the gate's own route: edge, all gates pass)")
    # an alerting tool firing the same trigger again records nothing new
    again = _cli(db_path, cfg, *rollback, "--as-of", _at(taken + timedelta(minutes=30)))
    assert (again["outcome"], again["action"]["action_id"]) == ("already", out["action"]["action_id"])
    assert query(db_path, "SELECT count(*) FROM rollout_actions") == [(1,)]

    view = _cli(db_path, cfg, "state", "--release", "4.12", "--as-of", _at(taken + timedelta(hours=1)))
    _validator("state").validate(view)
    low = _low(view)
    assert (low["state"], low["route"], low["override"]["reason"]) == ("ok", "cloud", "pagerduty:INC123")
    assert view["status"] == "partial_rollback" and "1 segment overridden by people" in view["headline"]
    assert [a["actor"] for a in view["actions"]] == ["pd-bot"]
    # the alert of the action, in the outbox: the override and its reason beside the gate's own state
    payload = json.loads(query(db_path, "SELECT payload FROM alerts ORDER BY created_at DESC LIMIT 1")[0][0])
    assert payload["kind"] == "partial_rollback" and payload["overrides"][0]["reason"] == "pagerduty:INC123"
    assert (f"- override {LOW}: rolled back by pd-bot at 2026-11-12 05:00 UTC: pagerduty:INC123 "
            "(the gate's own state: ok)") in payload["text"].splitlines()

    result, recorded = judge(db_path, cfg, night[2])  # the next night passes: the override holds
    assert result.verdict == "keep_edge"
    route, why = _route(result, cfg, recorded.states)
    assert route == "cloud" and why.startswith("override: ")
    table = routing_table(result.to_dict(), cfg, recorded.states)
    _validator("routing").validate(table)
    entry = next(r for r in table["routes"] if f"{r['task']}/{r['device_tier']}/{r['network_bucket']}" == LOW)
    assert entry["override"]["action"] == "rollback" and entry["override"]["actor"] == "pd-bot"

    done = run_cli("history", "--db", str(db_path), "--release", "4.12", "--format", "csv")
    rows = done.stdout.splitlines()
    assert rows[0].endswith(",trigger,overrides")
    assert f"rollback {LOW}: rolled back by pd-bot at 2026-11-12 05:00 UTC: pagerduty:INC123" in rows[1]
    assert rows[-1].endswith(",nightly,")  # the first night's evaluation: no action in force then
    table_view = run_cli("history", "--db", str(db_path), "--release", "4.12", "--format", "table").stdout
    assert "people's actions (pipeline rollout), newest first:" in table_view and "pagerduty:INC123" in table_view
    _validator("gate").validate(result.to_dict())
    explain = _cli(db_path, cfg, "explain", "--release", "4.12", "--segment", LOW, "--as-of", _at(night[2]))
    assert explain["decision"] == "keep_edge" and explain["rollout"]["override"]["action"] == "rollback"
    report = db_path.parent / "report.html"
    done = run_cli("report", "--db", str(db_path), "--release", "4.12", "--config", cfg.source, "--as-of",
                   _at(night[2]), "--out", str(report))
    assert done.returncode == 0, done.stderr
    assert ("<dt>override (a person&#x27;s action)</dt><dd>rewrite/low/normal: rolled back by pd-bot at "
            "2026-11-12 05:00 UTC: pagerduty:INC123; the gate&#x27;s own state: ok</dd>") in report.read_text()

    resumed = _cli(db_path, cfg, "rollout", "resume", "--release", "4.12", "--segment", LOW, "--reason",
                   "INC123 resolved", "--actor", "alice", "--no-alerts", "--as-of", _at(night[2] + timedelta(hours=4)))
    assert resumed["segments"][LOW]["route"] == "edge" and resumed["segments"][LOW]["override"] is None
    assert resumed["action"]["previous"][LOW] == {"state": "ok", "route": "cloud", "override": "rollback"}


def test_a_pause_and_a_deny_window_hold_recovery_and_let_a_rollback_through(db_path, nightly_config, tmp_path):
    night = nights(db_path, "PFPPPPPPPP")
    window_start = night[4] + timedelta(hours=3)
    text = Path(nightly_config.source).read_text().replace(
        "  windows: []", f"  windows: [{{name: freeze, kind: deny, start: '{_at(window_start)}', "
                         "duration_hours: 48}]")
    (tmp_path / "freeze.yaml").write_text(text)
    cfg = load_config(tmp_path / "freeze.yaml")
    assert cfg.rollout.windows[0].name == "freeze"
    routes, held = [], []
    for i, as_of in enumerate(night):
        if i == 1:  # paused before the failing night, until after night 5's look
            out = _cli(db_path, cfg, "rollout", "pause", "--release", "4.12", "--reason", "release freeze",
                       "--until", _at(night[4] + timedelta(hours=3)), "--actor", "rm", "--no-alerts",
                       "--as-of", _at(night[0] + timedelta(hours=3)))
            assert out["outcome"] == "stored" and out["action"]["segment"] == "*"
        result, recorded = judge(db_path, cfg, as_of)
        routes.append(_route(result, cfg, recorded.states)[0])
        held.append(recorded.states[LOW].held)
    # night 2 fails while paused: rolled back at once; the dwell ends by night 4, but recovery waits for the
    # pause (nights 4, 5) and the deny window (nights 6, 7); recovering from night 8, ok after 3 passes (night 10)
    assert routes == ["edge"] + ["cloud"] * 8 + ["edge"]
    assert held[3].startswith("paused by rm at 2026-11-11 03:00 UTC until 2026-11-15 03:00 UTC: release freeze")
    assert held[5] == held[6] == "deny window freeze until 2026-11-17 03:00 UTC"
    assert held[7] == held[8] == ""
    looks = query(db_path, f"SELECT outcome FROM rollout_looks WHERE segment = '{LOW}' ORDER BY day")
    assert "".join(o[0][0].upper() for o in looks) == "PFPPPPPPPP"  # the gate judged every night
    view = _cli(db_path, cfg, "state", "--release", "4.12", "--as-of", _at(night[5] + timedelta(hours=3)))
    assert view["policy"]["windows"][0]["name"] == "freeze"
    text = run_cli("state", "--db", str(db_path), "--config", cfg.source, "--release", "4.12", "--as-of",
                   _at(night[5] + timedelta(hours=3))).stdout
    action = next(line for line in text.splitlines() if "release freeze" in line)
    assert [line for line in text.splitlines() if "None" in line] == [] and "[was: 37 segments: 1 ok, " in action


def test_an_accepted_failure_expires_on_time_and_another_gate_ends_it(db_path, nightly_config):
    cfg = nightly_config
    night = nights(db_path, "FFFFF")
    result, recorded = judge(db_path, cfg, night[0])
    low = recorded.states[LOW]
    assert low.state == "rolled_back" and low.failed_gates == ("peak_memory", "resident_memory")
    until = night[2] + timedelta(hours=3)
    out = _cli(db_path, cfg, "rollout", "promote", "--release", "4.12", "--segment", LOW, "--reason",
               "known memory regression on low tier, fix in 4.13", "--until", _at(until), "--actor", "alice",
               "--no-alerts", "--as-of", _at(night[0] + timedelta(hours=3)))
    seg = out["segments"][LOW]
    assert out["action"]["gates"] == ["peak_memory", "resident_memory"]
    assert out["action"]["previous"][LOW] == {"state": "rolled_back", "route": "cloud", "override": None}
    assert (seg["state"], seg["route"]) == ("rolled_back", "edge")  # the gate's own state is still the rollback
    assert seg["route_reason"].startswith("override: promoted by alice at 2026-11-11 03:00 UTC until 2026-11-13 "
                                          "03:00 UTC: known memory regression on low tier, fix in 4.13; accepting "
                                          "failures of: peak_memory, resident_memory (the gate's own route: cloud, "
                                          "rolled_back: ")
    for as_of in night[1:3]:  # it keeps failing the accepted gate: on the edge, and said so
        result, recorded = judge(db_path, cfg, as_of)
        assert result.verdict != "keep_edge" and _route(result, cfg, recorded.states)[0] == "edge"
    before = _low(_cli(db_path, cfg, "state", "--release", "4.12", "--as-of", _at(until - timedelta(minutes=1))))
    after = _low(_cli(db_path, cfg, "state", "--release", "4.12", "--as-of", _at(until)))
    assert (before["route"], before["override"]["action"]) == ("edge", "promote")
    assert (after["route"], after["override"]) == ("cloud", None)  # expired on time, without waiting for a look
    result, recorded = judge(db_path, cfg, night[3])
    assert _route(result, cfg, recorded.states)[0] == "cloud"
    # a promote accepting another gate ends at the first look that fails one it did not accept
    out = _cli(db_path, cfg, "rollout", "promote", "--release", "4.12", "--segment", LOW, "--gate", "thermal",
               "--reason", "thermal only", "--until", _at(night[4] + timedelta(days=5)), "--no-alerts",
               "--as-of", _at(night[3] + timedelta(hours=3)))
    assert out["segments"][LOW]["route"] == "edge"
    result, recorded = judge(db_path, cfg, night[4])
    assert recorded.states[LOW].override is None and _route(result, cfg, recorded.states)[0] == "cloud"


def test_a_hold_gate_holds_the_segment_and_alerts_without_rolling_back(db_path, nightly_config, tmp_path):
    text = Path(nightly_config.source).read_text()
    for gate in ("peak_memory:           {mode: enforce", "resident_memory:       {mode: enforce"):
        assert gate in text
        text = text.replace(gate, gate.replace("enforce", "hold"))
    (tmp_path / "hold.yaml").write_text(text)
    cfg = load_config(tmp_path / "hold.yaml")
    assert cfg.gates.peak_memory.mode == "hold"
    night = nights(db_path, "F")
    result, recorded = judge(db_path, cfg, night[0])
    seg = next(s for s in result.to_dict()["segments"] if f"{s['task']}/{s['device_tier']}/"
               f"{s['network_bucket']}" == LOW)
    assert seg["held_gates"] == ["peak_memory", "resident_memory"] and seg["failed_gates"] == []
    assert recorded.states[LOW].held == "hold gate failed: peak_memory, resident_memory"
    assert _route(result, cfg, recorded.states)[0] == "edge"
    kinds = query(db_path, "SELECT payload->>'kind', severity FROM alerts ORDER BY created_at")
    assert kinds[-1] == ("held", "warning")


def test_an_action_while_a_writer_holds_the_warehouse_is_in_force_at_once_and_stored_once(db_path, nightly_config):
    cfg = nightly_config
    night = nights(db_path, "P")
    judge(db_path, cfg, night[0])
    with writer_holding(db_path):
        args = ("rollout", "rollback", "--release", "4.12", "--segment", LOW, "--reason", "pagerduty:INC9",
                "--no-alerts", "--as-of", _at(night[0] + timedelta(hours=3)))
        out = _cli(db_path, cfg, *args)
        assert out["outcome"] == "pending" and out["segments"][LOW]["route"] == "cloud"
        assert _cli(db_path, cfg, *args)["outcome"] == "already"
        view = _cli(db_path, cfg, "state", "--release", "4.12", "--as-of", _at(night[0] + timedelta(hours=4)))
        assert _low(view)["route"] == "cloud"
    result, recorded = judge(db_path, cfg, night[0] + timedelta(hours=5))  # the next writer folds it in
    assert query(db_path, "SELECT action, reason FROM rollout_actions") == [("rollback", "pagerduty:INC9")]
    assert _route(result, cfg, recorded.states)[0] == "cloud"


def test_usage_errors_name_the_option(db_path, nightly_config):
    judge(db_path, nightly_config, nights(db_path, "P")[0])
    base = ("rollout", "promote", "--db", str(db_path), "--release", "4.12", "--config", nightly_config.source)
    cases = {
        ("--reason", "x"): "pipeline rollout: error: promote needs --until TIME: an accepted failure must expire",
        ("--reason", " ", "--until", "2027-01-01"): "pipeline rollout: error: --reason is required and must not be "
                                                    "blank: it is what people read later",
        ("--reason", "x", "--until", "2027-01-01", "--segment", "rewrite/low"):
            "pipeline rollout: error: --segment 'rewrite/low': release 4.12 has no such segment; segments: ",
        ("--reason", "x", "--until", "2027-01-01", "--gate", "heat"):
            "pipeline rollout: error: --gate 'heat' is not a gate; gates: ",
    }
    for extra, message in cases.items():
        done = run_cli(*base, *extra)
        assert done.returncode == 2 and done.stderr.startswith(message), done.stderr


@pytest.mark.parametrize("window, message", [
    ("{name: f, kind: deny, start: '2026-12-19T00:00', rrule: 'FREQ=WEEKLY;BYDAY=FO'}",
     "rollout.windows[0].rrule: 'FREQ=WEEKLY;BYDAY=FO' is not an RFC 5545 recurrence rule: invalid 'BYDAY': FO"),
    ("{name: f, kind: deny, start: '2026-12-19T00:00', timezone: Mars/Olympus}",
     "rollout.windows[0].timezone: 'Mars/Olympus' is not an IANA time zone (e.g. Europe/Berlin)"),
    ("{name: f, kind: freeze, start: '2026-12-19T00:00'}", "rollout.windows[0].kind"),
])
def test_windows_are_linted_like_the_rest_of_the_file(tmp_path, window, message):
    text = load_config().source
    body = Path(text).read_text().replace("  windows: []", f"  windows: [{window}]")
    (tmp_path / "w.yaml").write_text(body)
    done = run_cli("gate", "--check-config", "--config", str(tmp_path / "w.yaml"))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1


def test_a_window_follows_its_time_zone_across_daylight_saving():
    fridays = RolloutWindow(name="fri", kind="deny", start="2026-03-20T18:00", duration_hours=2,
                     rrule="FREQ=WEEKLY;BYDAY=FR", timezone="Europe/Berlin")
    assert occurrence(fridays, datetime(2026, 3, 20, 17, 30)) == (datetime(2026, 3, 20, 17), datetime(2026, 3, 20, 19))
    # after the switch to summer time on 29 March 18:00 Berlin is 16:00 UTC
    assert occurrence(fridays, datetime(2026, 4, 3, 16, 30)) == (datetime(2026, 4, 3, 16), datetime(2026, 4, 3, 18))
    assert occurrence(fridays, datetime(2026, 4, 3, 18, 0)) is None
    policy = dataclasses.replace(load_config().rollout, windows=(
        fridays, RolloutWindow(name="weekdays", kind="allow", start="2026-03-16T09:00", duration_hours=8,
                        rrule="FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR", timezone="Europe/Berlin")))
    assert hold(policy, datetime(2026, 4, 3, 16, 30)) == "deny window fri until 2026-04-03 18:00 UTC"
    assert hold(policy, datetime(2026, 4, 4, 10)) == "outside the allow windows (weekdays)"
    assert hold(policy, datetime(2026, 4, 2, 10)) is None
