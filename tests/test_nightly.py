"""The nightly job and the scheduler, with the real APScheduler, real signals and real subprocesses."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from conftest import NOW, ROOT, counts, free_port, run_cli, valid_table, wait_until, write
from test_alerts import Receiver

from pipeline.common.config import load_config
from pipeline.jobs.nightly import run_nightly
from pipeline.planning.simulate import write_parquet
from pipeline.warehouse import db


def runs(db_path: Path) -> list[tuple]:
    if not db_path.exists():
        return []
    try:
        con = duckdb.connect(str(db_path), read_only=True)
    except duckdb.Error:
        return []  # a writer holds the file just now
    try:
        return con.execute("SELECT run_id, kind, status, error FROM runs ORDER BY run_id").fetchall()
    except duckdb.Error:
        return []
    finally:
        con.close()


def files_stored(db_path: Path) -> int:
    """Manifest rows committed so far (0 while a writer holds the file)."""
    try:
        con = duckdb.connect(str(db_path), read_only=True)
    except duckdb.Error:
        return 0
    try:
        return con.execute("SELECT count(*) FROM files").fetchone()[0]
    except duckdb.Error:
        return 0
    finally:
        con.close()


def start(*args: str, log: Path | None = None) -> subprocess.Popen:
    """`pipeline *args` in a subprocess; its stderr (the logs) into the file `log` if given, so that a test can read
    them while it runs."""
    stderr = subprocess.PIPE if log is None else log.open("w")
    try:
        return subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=stderr)
    finally:
        if log is not None:
            stderr.close()  # the child has its own copy


def json_logs(log: Path) -> list[dict]:
    """The records so far of a `--log-format json` log: its whole lines (not one still being written) that are JSON
    (not, say, a library's warning printed by Python)."""
    records = []
    for line in log.read_text().splitlines(keepends=True):
        if line.endswith("\n") and line.startswith("{"):
            records.append(json.loads(line))
    return records


def schedule_start(log: Path) -> dict | None:
    """The scheduler's `start` record (its next fire time and whether it catches up), once it has logged it."""
    return next((r for r in json_logs(log) if r["event"] == "schedule" and r.get("step") == "start"), None)


def stop(proc: subprocess.Popen) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    write(valid_table(500, seed=1), tmp_path / "land" / "a.parquet")
    return tmp_path / "land"


def test_scheduler_fires_refuses_a_second_and_stops_on_sigterm(db_path, landing):
    proc = start("schedule", "--db", str(db_path), "--landing", str(landing), "--interval-seconds", "2")
    try:
        wait_until(lambda: [r for r in runs(db_path) if r[2] == "ok"], 90, "a scheduled run finished ok",
                   every=0.3)
        second = run_cli("schedule", "--db", str(db_path), "--landing", str(landing), "--interval-seconds", "2")
        assert second.returncode == 2
        assert f"database {db_path} already has a scheduler (pid {proc.pid}, `pipeline schedule" in second.stderr
    finally:
        code, out, err = stop(proc)
    assert code == 0, err
    assert out.strip().endswith("pipeline schedule: stopped by a signal")
    assert all(r[1] == "scheduled" and r[2] in ("ok", "interrupted") for r in runs(db_path))


def test_a_sigterm_taken_by_another_thread_still_stops_the_scheduler(tmp_path, db_path):
    """The kernel may hand a process's SIGTERM to any of its threads, and Python runs the handler only when the
    main thread runs bytecode: a main thread asleep in a wait without timeout never ran it, and the scheduler
    went on firing (seen once under load in CI; the child then outlived the test)."""
    from apscheduler.triggers.interval import IntervalTrigger

    from pipeline.common import stopping
    from pipeline.jobs.schedule import run_scheduler

    fired, returned = threading.Event(), threading.Event()
    main = threading.get_ident()

    def from_a_worker_thread() -> None:
        fired.wait(30)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # this thread's handler runs, not main's
        if not returned.wait(15):  # the first was lost: a signal to the main thread ends the test, not a hang
            signal.pthread_kill(main, signal.SIGTERM)

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    sender = threading.Thread(target=from_a_worker_thread, daemon=True)
    sender.start()
    started = time.monotonic()
    try:
        why = run_scheduler(db_path, tmp_path, load_config(), IntervalTrigger(seconds=0.2), 3600, fired.set)
    finally:
        returned.set()
        sender.join()  # no signal may reach this process once pytest's own handlers are back
        for s, h in handlers.items():
            signal.signal(s, h)
        stopping.reset()
    assert why == "stopped by a signal"
    assert time.monotonic() - started < 10


def test_a_missed_night_is_caught_up_exactly_once(db_path, landing, tmp_path):
    with db.writing(db_path) as con:  # the last scheduled run was two days ago: last night's 02:00 was missed
        con.execute("INSERT INTO runs (run_id, kind, started_at, finished_at, status) "
                    "VALUES (nextval('run_id_seq'), 'scheduled', ?, ?, 'ok')",
                    [db.utcnow() - timedelta(days=2), db.utcnow() - timedelta(days=2)])
    first_log, again_log = tmp_path / "first.log", tmp_path / "again.log"
    proc = start("--log-format", "json", "schedule", "--db", str(db_path), "--landing", str(landing),
                 "--cron", "0 2 * * *", log=first_log)
    try:
        plan = wait_until(lambda: schedule_start(first_log), 90, "the scheduler logged its start")
        # one catch-up run now; the nightly itself not before the next 02:00 (not the missed one, as a misfire)
        assert plan["catch_up"] is True, plan
        next_run = datetime.fromisoformat(plan["next_run"])
        assert (next_run.hour, next_run.minute) == (2, 0) and next_run > datetime.fromisoformat(plan["ts"]), plan

        def caught_up() -> bool:
            now = runs(db_path)
            return len(now) == 2 and now[-1][2] != "running"

        wait_until(caught_up, 90, "the catch-up run was recorded as finished", every=0.3)
    finally:
        code, _, _ = stop(proc)
    assert code == 0, first_log.read_text()
    ended = [r["run"] for r in json_logs(first_log) if r["event"] == "nightly" and r.get("step") == "end"]
    assert len(ended) == 1 and len(runs(db_path)) == 2, first_log.read_text()  # in the scheduler's whole life

    again = start("--log-format", "json", "schedule", "--db", str(db_path), "--landing", str(landing),
                  "--cron", "0 2 * * *", log=again_log)
    try:  # the catch-up run is newer than the last fire time: nothing to catch up
        plan = wait_until(lambda: schedule_start(again_log), 90, "the second scheduler logged its start")
        assert plan["catch_up"] is False, plan
    finally:
        code, _, _ = stop(again)
    assert code == 0, again_log.read_text()
    assert [r[2] for r in runs(db_path)] == ["ok", "ok"]


def _long_nightly(db_path: Path, tmp_path: Path, seed: int) -> tuple[subprocess.Popen, Path]:
    """A nightly over 16 files of 2,000 rows, each its own batch, once it has loaded 3 of them."""
    land = tmp_path / "land"
    for i in range(16):
        write(valid_table(2000, seed=seed + i), land / f"part-{i:02d}.parquet")
    proc = start("nightly", "--db", str(db_path), "--landing", str(land), "--validate-batch-rows", "1")

    def loaded() -> int:
        try:
            return counts(db_path)["files_loaded"]
        except duckdb.Error:
            return 0

    wait_until(lambda: loaded() >= 3, 90, "the nightly loaded 3 of its 16 files")
    return proc, land


def test_sigterm_during_a_long_ingest_leaves_exact_counts_and_the_next_run_finishes(db_path, tmp_path):
    proc, land = _long_nightly(db_path, tmp_path, 200)
    code, _, err = stop(proc)
    assert code == 130, err
    assert "stopped by a signal after the last whole file; run it again to finish" in err
    c = counts(db_path)
    assert 3 <= c["files_loaded"] < 16
    assert c["events"] == c["accepted"] == 2000 * c["files_loaded"]
    assert runs(db_path)[-1][2] == "interrupted"

    again = run_cli("nightly", "--db", str(db_path), "--landing", str(land))
    assert again.returncode == 0, again.stderr
    c = counts(db_path)
    assert (c["files_loaded"], c["events"], c["distinct_ids"]) == (16, 32_000, 32_000)
    assert [r[2] for r in runs(db_path)] == ["interrupted", "ok"]


def test_a_nightly_killed_mid_run_is_marked_aborted_and_the_rerun_loads_exactly_the_rest(db_path, tmp_path):
    """SIGKILL leaves no chance to record anything: the run stays `running` in the table. `pipeline runs` shows
    it aborted at once, the next writer marks it so, and the next nightly loads exactly the missing files and
    says a previous run was aborted (a data-quality problem: exit 4)."""
    proc, land = _long_nightly(db_path, tmp_path, 300)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    c = counts(db_path)
    assert 3 <= c["files_loaded"] < 16 and c["events"] == c["accepted"] == 2000 * c["files_loaded"]
    assert [r[2] for r in runs(db_path)] == ["running"]  # as the killed process left it
    shown = run_cli("runs", "--db", str(db_path))
    assert shown.returncode == 0 and ",aborted,aborted: its process (pid " in shown.stdout, shown.stdout
    again = run_cli("nightly", "--db", str(db_path), "--landing", str(land))
    assert again.returncode == 4, again.stdout + again.stderr
    assert "DATA QUALITY: a previous run was aborted: run 1 (nightly, started " in again.stdout
    c = counts(db_path)
    assert (c["files_loaded"], c["events"], c["distinct_ids"]) == (16, 32_000, 32_000)
    (first, _, first_status, error), (_, _, second_status, _) = runs(db_path)
    assert (first_status, second_status) == ("aborted", "ok")
    assert error.startswith(f"aborted: its process (pid {proc.pid}) ended without finishing the run (killed, out of "
                            "memory or power lost); found ")
    third = run_cli("nightly", "--db", str(db_path), "--landing", str(land))
    assert third.returncode == 0 and "aborted" not in third.stdout  # reported once, after the last finished run


def test_a_run_failing_on_a_dead_webhook_is_recorded_and_its_alerts_arrive_next_run(db_path, landing):
    dead = f"http://127.0.0.1:{free_port()}/hook"
    base = load_config()

    def config(url: str):
        return dataclasses.replace(base, alerts=dataclasses.replace(
            base.alerts, stdout=False, webhook_url=url, webhook_retries=1, webhook_backoff_s=0.05))

    run, _ = run_nightly(db_path, landing, config(dead), as_of=NOW)
    assert run.status == "failed" and "could not be delivered" in run.error
    assert runs(db_path)[-1][2:] == ("failed", run.error)
    hook = Receiver([])
    try:
        run, _ = run_nightly(db_path, landing, config(hook.url), as_of=NOW)
        assert run.status == "ok"
        assert len(hook.received) == 1 and hook.received[0][1]["release"] == "4.12"
    finally:
        hook.close()


def test_nightly_over_30_files_with_3_bad_loads_27_and_still_judges(db_path, tmp_path):
    land = tmp_path / "land"
    write_parquet(land, "4.12", 27 * 800, "healthy", seed=9, start=NOW - timedelta(days=6), days=6, files=27)
    (land / "garbage.parquet").write_bytes(b"not parquet")
    write(valid_table(10).drop_columns(["route"]), land / "no_route.parquet")
    good = next(land.rglob("part-0-*.parquet")).read_bytes()
    (land / "truncated.parquet").write_bytes(good[: len(good) // 3])
    proc = run_cli("nightly", "--db", str(db_path), "--landing", str(land), "--as-of", NOW.isoformat(), "--json")
    assert proc.returncode == 4, proc.stderr  # the job ran; the rejected files raise a data-quality alarm
    import json

    out = json.loads(proc.stdout)
    ingest = out["steps"]["ingest"]
    assert (ingest["files"], ingest["loaded_files"], ingest["accepted"]) == (30, 27, 27 * 800)
    reasons = {Path(r["path"]).name: r["reason"] for r in ingest["rejected_files"]}
    assert set(reasons) == {"garbage.parquet", "no_route.parquet", "truncated.parquet"}
    assert reasons["no_route.parquet"] == "missing required column 'route'"
    # a healthy release stays on the edge though three files beside it were rejected
    assert out["verdicts"] == {"4.12": "keep_edge"} and out["gates"][0]["verdict"] == "keep_edge"
    assert out["status"] == "ok"
    assert out["data_quality"][0].startswith("3 of 30 files rejected: ")


def test_gate_answers_while_the_nightly_job_writes(db_path, tmp_path):
    """`pipeline gate` reads from the last committed state: the writer holds the file only for
    one batch of files at a time, and readers wait for up to 30 s between batches."""
    write_parquet(tmp_path / "first", "4.12", 20_000, "healthy", seed=3, start=NOW - timedelta(days=6), days=6)
    assert run_cli("ingest", "--db", str(db_path), str(tmp_path / "first")).returncode == 0
    land = tmp_path / "land"
    for i in range(16):
        write(valid_table(2000, seed=300 + i), land / f"part-{i:02d}.parquet")
    before = files_stored(db_path)
    writer = start("nightly", "--db", str(db_path), "--landing", str(land), "--validate-batch-rows", "1")
    try:
        # GX has loaded; files are being stored
        wait_until(lambda: files_stored(db_path) > before, 120, "the nightly stored its first file", every=0.3)
        assert writer.poll() is None
        gate = run_cli("gate", "--db", str(db_path), "--release", "4.12", "--as-of", NOW.isoformat(), "--no-alerts")
        assert gate.returncode in (0, 1, 3), gate.stderr
        assert "verdict for release 4.12:" in gate.stdout
        assert writer.poll() is None  # it answered while the job was still writing
        assert "another writer is busy; this evaluation and its alert are stored by the next one" in gate.stderr
    finally:
        writer.communicate(timeout=180)  # waits, reading and closing its pipes
    assert writer.returncode == 0
    pending = Path(f"{db_path}.pending-evaluations.jsonl")
    # the nightly folded the waiting evaluation in, unless the gate wrote it after the nightly's last fold (a
    # loaded machine): then it waits for the next writer, below; it is never lost or stored twice
    waiting = len(pending.read_text().splitlines()) if pending.exists() else 0
    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("SELECT count(*) FROM evaluations WHERE release = '4.12'").fetchone()[0] + waiting == 2
    con.close()
    again = run_cli("gate", "--db", str(db_path), "--release", "4.12", "--as-of", NOW.isoformat(), "--no-alerts")
    assert again.returncode in (0, 1, 3)
    assert not pending.exists()
    con = duckdb.connect(str(db_path), read_only=True)
    stored = con.execute("SELECT count(*) FROM evaluations WHERE release = '4.12'").fetchone()[0]
    con.close()
    assert stored == 3  # the nightly's own, the one that waited, and this one
