"""Intra-day looks (`pipeline look`, `pipeline schedule --look-every`; docs/intraday.md): a regression that lands
during the day rolls its segments back at that look and their route is published, the look is stored as a look
and never as an evaluation of a day, and the nightly's whole-day verdicts are those it gives without looks."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml
from conftest import ROOT, query, run_cli, wait_until
from test_output_schema import _validator

LOW_TIER = {f"{task}/low/{bucket}" for task in ("intent", "rewrite", "summarize")
            for bucket in ("normal", "offline", "weak")}


def _config(tmp_path: Path) -> Path:
    raw = yaml.safe_load((ROOT / "gates" / "admission.yaml").read_text())
    raw["publish"] = {"targets": [{"kind": "flagd", "path": str(tmp_path / "edge-routing.flagd.json")}]}
    path = tmp_path / "gates.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _whole_day_verdicts(db: Path) -> list[tuple]:
    """Each stored evaluation's as-of, verdict and every segment's decision and failed gates."""
    out = []
    for as_of, verdict, result in query(db, "SELECT as_of, verdict, result FROM evaluations ORDER BY as_of"):
        segments = sorted((f"{s['task']}/{s['device_tier']}/{s['network_bucket']}", s["decision"],
                           tuple(s["failed_gates"])) for s in json.loads(result)["segments"])
        out.append((as_of, verdict, segments))
    return out


def test_a_regression_landing_during_the_day_is_rolled_back_at_the_look_and_whole_days_are_judged_as_without(
        tmp_path):
    landing, db, config = tmp_path / "landing", tmp_path / "telemetry.duckdb", _config(tmp_path)
    made = run_cli("simulate", "--out", str(landing), "--release", "4.12", "--rows", "60000", "--files", "4",
                   "--seed", "1", "--start", "2026-11-20", "--days", "10")
    assert made.returncode == 0, made.stderr
    night = run_cli("nightly", "--landing", str(landing), "--db", str(db), "--config", str(config),
                    "--as-of", "2026-11-30")
    assert night.returncode == 0, night.stderr
    assert "release 4.12: keep_edge" in night.stdout
    without = tmp_path / "without.duckdb"
    shutil.copy(db, without)
    published = json.loads((tmp_path / "edge-routing.flagd.json").read_text())
    # the post-mortem's regression lands on the 30th, before the day is over
    made = run_cli("simulate", "--out", str(landing / "2026-11-30"), "--release", "4.12", "--rows", "8000",
                   "--files", "2", "--scenario", "postmortem", "--seed", "2", "--start", "2026-11-30", "--days", "1")
    assert made.returncode == 0, made.stderr
    landed = int(time.time()) - 600  # the day's files landed ten minutes before the look
    parts = list((landing / "2026-11-30").rglob("*.parquet"))
    assert len(parts) == 2
    for part in parts:
        os.utime(part, (landed, landed))

    look = run_cli("look", "--landing", str(landing), "--db", str(db), "--config", str(config),
                   "--as-of", "2026-11-30 23:30")
    assert look.returncode == 0, look.stderr
    moved = query(db, "SELECT moved, failed_segments FROM intraday_looks")
    assert len(moved) == 1
    rolled = set(moved[0][0])
    # the day so far is the post-mortem's build alone: the release-wide quality loss and the low tier fail
    assert {"release", "intent/low/normal", "rewrite/low/normal"} <= rolled, rolled
    assert rolled == set(moved[0][1])  # every failing segment moved: all were on the edge
    assert (f"release 4.12: rolled_back: {', '.join(sorted(rolled))} (intra-day look at 2026-11-30 23:30 UTC)"
            in look.stdout)
    assert "2 files loaded" in look.stdout and "archive" not in look.stdout  # the archive stays the nightly's
    # the alert (the stdout sink) says what judged
    assert "judged by the intra-day look at 2026-11-30T23:30:00Z (the day so far): verdict rollback_to_cloud" \
        in look.stdout
    state = json.loads(run_cli("state", "--db", str(db), "--release", "4.12", "--json").stdout)
    by_key = {s["segment"]: s for s in state["segments"]}
    for key in rolled:
        assert by_key[key]["state"] == "rolled_back", by_key[key]
        assert "failed on 2026-11-30, intra-day look at 23:30 UTC" in by_key[key]["reason"], by_key[key]
    for key, segment in by_key.items():  # the release rolled back: every route is the cloud, each state its own
        assert key == "release" or segment["route"] == "cloud", segment
        assert key in rolled or segment["state"] == "ok", segment
    # how long from the landing to the phones: on record, in state and in the metrics
    seen = state["intraday"]
    assert seen["looked_at"] == "2026-11-30T23:30:00Z" and sorted(seen["moved"]) == sorted(rolled)
    assert seen["landed_from"] == datetime.fromtimestamp(landed, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert 10 <= seen["landing_to_route_minutes"] < 12, seen
    shown = run_cli("state", "--db", str(db), "--release", "4.12").stdout
    assert (f"intra-day look at 2026-11-30T23:30:00Z moved {len(rolled)} segments; route published at "
            f"{seen['published_at']}, {seen['landing_to_route_minutes']:g} min after the oldest file it read had "
            f"landed ({seen['landed_from']})") in shown
    metrics = run_cli("metrics", "--db", str(db)).stdout
    gauge = re.search(r'^edge_pipeline_intraday_landing_to_route_seconds\{release="4.12"\} ([\d.e+]+)$', metrics, re.M)
    assert gauge and 600 <= float(gauge.group(1)) < 720, metrics
    # the phones' flag file changed at the look, to the cloud for every moved segment
    flags = json.loads((tmp_path / "edge-routing.flagd.json").read_text())
    assert flags != published
    assert query(db, "SELECT count(*) FROM evaluations") == [(1,)]  # a look is not an evaluation of a day
    writes = query(db, "SELECT count(*) FROM routing_publishes WHERE status = 'published'")[0][0]

    again = run_cli("look", "--landing", str(landing), "--db", str(db), "--config", str(config),
                    "--as-of", "2026-11-30 23:45", "--json")  # nothing new: nothing moves, nothing is published
    assert again.returncode == 0, again.stderr
    said = json.loads(again.stdout)
    _validator("nightly").validate(said)  # a look's JSON is the nightly's, its window the day so far
    assert [g["window"]["partial_day"] for g in said["gates"]] == [
        {"start": "2026-11-30T00:00:00Z", "end": "2026-11-30T23:45:00Z"}]
    assert said["gates"][0]["window"]["days"] == 0 and said["gates"][0]["window"]["whole_days"] is False
    assert query(db, "SELECT count(*), count(*) FILTER (WHERE len(moved) = 0) FROM intraday_looks") == [(2, 1)]
    assert query(db, "SELECT count(*) FROM routing_publishes WHERE status = 'published'")[0][0] == writes
    history = run_cli("history", "--db", str(db), "--release", "4.12", "--format", "table")
    assert "intra-day looks (pipeline look), newest first:" in history.stdout
    assert "2026-11-30 23:45:00+00:00" in history.stdout and "2026-11-30 23:30:00+00:00" in history.stdout

    # the next night judges the whole 30th the same way with and without the looks
    for warehouse in (db, without):
        night = run_cli("nightly", "--landing", str(landing), "--db", str(warehouse), "--config", str(config),
                        "--as-of", "2026-12-01", *(["--report-dir", str(tmp_path / "reports")] if warehouse == db
                                                   else []))
        assert night.returncode == 0, night.stderr
    assert _whole_day_verdicts(db) == _whole_day_verdicts(without)
    assert _whole_day_verdicts(db)[-1][1] != "keep_edge"
    # the night's report tells the look's story in state's words
    page = (tmp_path / "reports" / "report-4.12.html").read_text()
    assert (f"<dt>intra-day look</dt><dd>intra-day look at 2026-11-30T23:30:00Z moved {len(rolled)} segments; "
            f"route published at {seen['published_at']}, {seen['landing_to_route_minutes']:g} min after") in page


def test_schedule_looks_every_interval_between_nightly_runs_and_stops_on_sigterm(tmp_path):
    landing, db = tmp_path / "landing", tmp_path / "telemetry.duckdb"
    made = run_cli("simulate", "--out", str(landing), "--release", "4.12", "--rows", "3000", "--files", "1",
                   "--seed", "1", "--days", "3")
    assert made.returncode == 0, made.stderr
    scheduler = subprocess.Popen([sys.executable, "-m", "pipeline", "schedule", "--landing", str(landing), "--db",
                                  str(db), "--cron", "0 2 29 2 *", "--look-every", "2s"], cwd=ROOT,
                                 env={**os.environ, "CI": ""}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
    try:
        wait_until(lambda: db.exists() and _looks_done(db) >= 2, 90, "two intra-day looks")
    finally:
        scheduler.send_signal(signal.SIGTERM)
        out, err = scheduler.communicate(timeout=60)
    assert scheduler.returncode == 0, err
    assert "pipeline schedule: stopped by a signal" in out
    kinds = {k for (k,) in query(db, "SELECT DISTINCT kind FROM runs")}
    assert kinds == {"look"}, kinds  # the nightly's cron (February 29th) is not due: only looks ran
    assert query(db, "SELECT count(*) FROM runs WHERE status = 'ok'")[0][0] >= 2
    assert query(db, "SELECT count(*) FROM evaluations") == [(0,)]
    assert "look step=gate" in err


def _looks_done(db: Path) -> int:
    from pipeline.warehouse import db as warehouse

    try:
        with warehouse.reading(db) as con:
            return con.execute("SELECT count(*) FROM runs WHERE kind = 'look' AND status = 'ok'").fetchone()[0]
    except Exception:  # not created yet, or held: the next poll tells
        return 0


def test_the_samples_whole_day_verdicts_are_the_same_after_an_intraday_look(tmp_path):
    """`make demo`'s sample, judged by the nightly of the 30th, looked at during the 30th, then judged by the
    nightly of December 1st: every release's verdict and segment decisions are those without the look."""
    looked, plain = tmp_path / "looked.duckdb", tmp_path / "plain.duckdb"
    night = run_cli("nightly", "--landing", "sample_logs", "--db", str(looked), "--as-of", "2026-11-30")
    assert night.returncode == 0, night.stderr
    shutil.copy(looked, plain)
    look = run_cli("look", "--landing", "sample_logs", "--db", str(looked), "--as-of", "2026-11-30 12:00")
    assert look.returncode == 0, look.stderr
    # 4.12 was rolled back by the nightly already (its failing look restarts the dwell), 4.11 passes (no move)
    assert query(looked, "SELECT release, verdict, len(moved) FROM intraday_looks ORDER BY release") == [
        ("4.11", "keep_edge", 0), ("4.12", "rollback_to_cloud", 0)]
    for db in (looked, plain):
        night = run_cli("nightly", "--landing", "sample_logs", "--db", str(db), "--as-of", "2026-12-01")
        assert night.returncode == 0, night.stderr
    assert _whole_day_verdicts(looked) == _whole_day_verdicts(plain)
    assert [v for _, v, _ in _whole_day_verdicts(plain)][-2:] == ["keep_edge", "rollback_to_cloud"]
