"""One clock (pipeline/common/clock.py): --as-of pins the 'now' of a replay, so the demo
gives the same stored rows and verdicts on any day; without it the wall clock
still rejects events from the future."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import datetime, timedelta

import duckdb
from conftest import ROOT, demo_nightly_args, program, run_cli, valid_table, with_values, write


def _future_rows_table(as_of: datetime):
    table = valid_table(3, start=as_of - timedelta(hours=1))
    table = with_values(table, 0, event_time=as_of + timedelta(hours=12))  # within the 24 h allowance
    return with_values(table, 1, event_time=as_of + timedelta(hours=30))  # beyond it


def test_as_of_pins_the_future_event_rule_of_ingest(tmp_path):
    as_of = datetime(2025, 6, 1)
    path = write(_future_rows_table(as_of), tmp_path / "landing" / "f.parquet")
    pinned = run_cli("ingest", "--db", str(tmp_path / "pinned.duckdb"), "--as-of", "2025-06-01", str(path))
    assert pinned.returncode == 4, pinned.stderr  # 1 of 3 quarantined: past the 5 % alarm
    assert "3 rows read: 2 accepted, 1 quarantined, 0 duplicates" in pinned.stdout
    con = duckdb.connect(str(tmp_path / "pinned.duckdb"), read_only=True)
    assert con.execute("SELECT rules FROM quarantine").fetchall() == [(["event_time_not_future"],)]
    con.close()
    # production: the wall clock of today, long after 2025-06-01, accepts all three
    wall = run_cli("ingest", "--db", str(tmp_path / "wall.duckdb"), str(path))
    assert "3 rows read: 3 accepted, 0 quarantined, 0 duplicates" in wall.stdout


def test_production_runs_still_reject_events_from_the_future(tmp_path):
    path = write(_future_rows_table(datetime.now().replace(microsecond=0)), tmp_path / "f.parquet")
    done = run_cli("ingest", "--db", str(tmp_path / "t.duckdb"), str(path))
    assert done.returncode == 4, done.stderr  # 1 of 3 quarantined: past the 5 % alarm
    assert "3 rows read: 2 accepted, 1 quarantined, 0 duplicates" in done.stdout


def test_a_bad_as_of_is_one_line_exit_2(tmp_path):
    done = run_cli("ingest", "--db", str(tmp_path / "t.duckdb"), "--as-of", "yesterday", str(ROOT / "sample_logs"))
    assert done.returncode == 2
    assert done.stderr.strip() == ("pipeline ingest: error: --as-of 'yesterday' is not an ISO date or time "
                                   "(e.g. 2026-12-02 or 2026-12-02T02:00Z)")


def _stored(db: str) -> dict[str, object]:
    con = duckdb.connect(db, read_only=True)
    try:
        return {
            "events": con.execute("SELECT count(*), sum(hash(event_id, event_time, total_ms)) FROM events").fetchone(),
            "quarantine": con.execute("SELECT count(*), list(DISTINCT rules ORDER BY rules) FROM quarantine")
            .fetchone(),
            "files": con.execute("SELECT list((path, status, rows_read, accepted, quarantined, duplicates, ingested_at)"
                                 " ORDER BY path) FROM files").fetchone(),
            "rollup": con.execute("SELECT count(*), sum(rows) FROM rollup_daily").fetchone(),
            "verdicts": con.execute("SELECT list((release, verdict, as_of) ORDER BY release) FROM evaluations")
            .fetchone(),
        }
    finally:
        con.close()


def _verdict_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("Release ", "  release "))]


def test_the_demo_gives_the_same_answer_under_a_clock_of_2025(tmp_path):
    """`make demo` under faketime '2025-06-01' stores the same rows and prints the same verdicts as today."""
    faketime = program("faketime")
    shutil.copytree(ROOT / "sample_logs", tmp_path / "sample_logs")
    today = run_cli(*demo_nightly_args("today.duckdb"), cwd=tmp_path)  # the real clock: in this process
    past = subprocess.run([faketime, "2025-06-01 00:00:00", sys.executable, "-m", "pipeline",
                           *demo_nightly_args("past.duckdb")], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert today.returncode == past.returncode == 0, past.stderr
    assert "2025-06-01T" in past.stderr  # the fake clock was really in force (log stamps are wall-clock)
    assert _verdict_lines(past.stdout) == _verdict_lines(today.stdout)
    # alerts on state changes only: 4.11 judged ok for the first time raises none
    assert _verdict_lines(today.stdout) == ["Release 4.12: rollback: all 36 segments to cloud",
                                            "  release 4.11: keep_edge", "  release 4.12: rollback_to_cloud"]
    assert _stored(str(tmp_path / "past.duckdb")) == _stored(str(tmp_path / "today.duckdb"))
    assert _stored(str(tmp_path / "today.duckdb"))["quarantine"][0] == 17
