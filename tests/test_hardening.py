"""Faults and hostile input (issue 13), each through the real CLI in a subprocess, on real files:
a runaway query, statements that are not reads, links out of the landing folder, a crash in the
commit, a full disk (RLIMIT_FSIZE), a storm of signals, a mistyped --db, a slow or throttling
webhook, APScheduler's own warnings under --log-format json, and a database held for too long."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import duckdb
import pytest
import yaml
from conftest import ROOT, LocalHttp, counts, free_port, run_cli, run_process, valid_table, wait_until, write

from pipeline.cli.main import HARD_STOP

RUNAWAY = "SELECT count(*) FROM range(100000000000) a, range(100000000000) b"
# the same kind of query without spilling (the sandbox caps temp files, which would end RUNAWAY by itself)
CPU_RUNAWAY = "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b"
READ_FORMS = "SELECT, WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN of one of them"
SAFE_STOP = "stopped by a signal after the last whole file; run it again to finish"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def start(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    """`pipeline *args` in a subprocess, its output piped unless `kwargs` say otherwise."""
    return subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=ROOT, text=True,
                            env={**os.environ, **(env or {})},
                            **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs})


def busiest_other_thread_cpu_s(pid: int) -> float:
    """The CPU time of the busiest thread of process `pid` other than its main one (0 once it has ended)."""
    most = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            if task.name != str(pid):
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                most = max(most, int(fields[11]) + int(fields[12]))  # utime + stime, in clock ticks
    except (FileNotFoundError, ProcessLookupError):  # the process or the thread ended meanwhile
        pass
    return most / os.sysconf("SC_CLK_TCK")


def files_rows(db_path: Path) -> list[tuple]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute("SELECT path, status, rows_read, accepted FROM files ORDER BY file_id").fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    """Two releases ingested once through the CLI; each test works on its own copy."""
    base = tmp_path_factory.mktemp("warehouse")
    land = base / "land"
    write(valid_table(400, seed=1), land / "a.parquet")
    t = valid_table(400, seed=2)
    write(t.set_column(t.column_names.index("release"), "release", [["4.11"] * 400]), land / "b.parquet")
    done = run_cli("ingest", "--db", str(base / "telemetry.duckdb"), str(land))
    assert done.returncode == 0, done.stderr
    return base / "telemetry.duckdb"


@pytest.fixture
def db_copy(warehouse, tmp_path) -> Path:
    path = tmp_path / "telemetry.duckdb"
    shutil.copy(warehouse, path)
    return path


def elapsed(*args: str, **kwargs) -> tuple[subprocess.CompletedProcess, float]:
    """The real command in its own process (a lock held by this test's process is another process's lock) and
    how long it took."""
    t = time.monotonic()
    done = run_process(*args, **kwargs)
    return done, time.monotonic() - t


# 1. pipeline sql / query: a time limit, Ctrl-C, and read statements only


def test_a_runaway_query_is_stopped_at_its_time_limit_with_exit_124(db_copy):
    before = sha256(db_copy)
    _, startup = elapsed("sql", "--db", str(db_copy), "SELECT 1")  # the fixed cost of starting the command
    done, took = elapsed("sql", "--db", str(db_copy), "--timeout", "2", RUNAWAY)
    assert done.returncode == 124
    assert done.stderr == ("pipeline sql: error: the statement was stopped after 2 s, its time limit; allow longer "
                           "with --timeout SECONDS or PIPELINE_SQL_TIMEOUT (0 = no limit)\n")
    assert took <= startup + 2 + 2, (took, startup)
    assert done.stdout == ""
    assert sha256(db_copy) == before

    done = run_cli("sql", "--db", str(db_copy), RUNAWAY, env={"PIPELINE_SQL_TIMEOUT": "1"})
    assert done.returncode == 124
    assert "stopped after 1 s, its time limit" in done.stderr


def test_ctrl_c_stops_a_runaway_query_at_once_with_exit_130(db_copy):
    proc = start("sql", "--db", str(db_copy), "--timeout", "0", CPU_RUNAWAY)
    try:
        def query_runs() -> bool:
            assert proc.poll() is None, f"pipeline sql ended before its query ran: {proc.communicate()}"
            # the query's work is the only thing that keeps a thread but the main one busy (startup: < 0.05 s)
            return busiest_other_thread_cpu_s(proc.pid) >= 0.2

        wait_until(query_runs, 60, "pipeline sql's query has run for 0.2 s of CPU in a thread", every=0.05)
        t = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t
    finally:
        proc.kill()  # the runaway query grows without bound: never leave it running
        proc.wait(timeout=30)  # and reaped here, so a failure here is not a ResourceWarning in the next test
    assert took < 2.0
    assert proc.returncode == 130
    assert err == "pipeline sql: interrupted; the query was stopped\n"
    assert out == ""


@pytest.mark.parametrize("statement, shown", [
    ("CHECKPOINT", "CHECKPOINT"),
    ("CREATE TEMP TABLE t AS SELECT 1", "CREATE"),
    ("SET threads = 1", "SET"),
    ("PRAGMA version", "PRAGMA"),
    ("CALL pragma_version()", "CALL"),
    ("EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1", "EXPLAIN CREATE"),
    ("-- a comment first\nCHECKPOINT", "CHECKPOINT"),
])
def test_statements_that_are_not_reads_are_refused(db_copy, statement, shown):
    before = sha256(db_copy)
    done = run_cli("sql", "--db", str(db_copy), statement)
    assert done.returncode == 2
    assert done.stderr == f"pipeline sql: error: {shown} is refused: only read statements run here ({READ_FORMS})\n"
    assert sha256(db_copy) == before


def test_more_than_one_statement_is_refused_and_reads_of_every_form_run(db_copy):
    before = sha256(db_copy)
    done = run_cli("sql", "--db", str(db_copy), "SELECT 1; SELECT 2")
    assert done.returncode == 2
    assert done.stderr == f"pipeline sql: error: give exactly one statement, got 2; allowed: {READ_FORMS}\n"
    for statement, first_line in [("WITH a AS (SELECT 7 AS x) SELECT x FROM a", "x"), ("FROM (VALUES (1)) v(n)", "n"),
                                  ("DESCRIBE files", "column_name,column_type,null,key,default,extra"),
                                  ("SUMMARIZE SELECT 1 AS one", "column_name,column_type,min,max,approx_unique,"
                                   "avg,std,q25,q50,q75,count,null_percentage"),
                                  ("EXPLAIN SELECT count(*) FROM events", "explain_key,explain_value"),
                                  ("SELECT count(*) AS n FROM events", "n")]:
        done = run_cli("sql", "--db", str(db_copy), "--format", "csv", statement)
        assert done.returncode == 0, (statement, done.stderr)
        assert done.stdout.splitlines()[0] == first_line
    assert run_cli("sql", "--db", str(db_copy), "--format", "csv", "SELECT count(*) AS n FROM events").stdout \
        == "n\n800\n"
    assert sha256(db_copy) == before


def test_a_named_query_runs_under_the_time_limit_too(db_copy):
    done = run_cli("query", "quarantine_reasons", "--db", str(db_copy), "--timeout", "30", "--format", "csv")
    assert done.returncode == 0, done.stderr
    done = run_cli("query", "quarantine_reasons", "--db", str(db_copy), "--timeout", "-1")
    assert done.returncode == 2
    assert done.stderr == "pipeline query: error: --timeout must be >= 0 seconds (0 = no limit)\n"


# 2. landing traversal: real paths inside the landing folder only; odd names escaped


def test_links_out_of_the_landing_folder_are_refused_by_name_and_never_opened(tmp_path):
    land, outside, db_path = tmp_path / "land", tmp_path / "outside", tmp_path / "telemetry.duckdb"
    write(valid_table(300, seed=5), land / "good.parquet")
    write(valid_table(300, seed=6), outside / "other.parquet")
    os.mkfifo(outside / "trap.parquet")  # opening it would block the run: proof that nothing outside is opened
    os.symlink(outside / "other.parquet", land / "link-to-other.parquet")
    os.symlink("/etc/passwd", land / "passwd.parquet")
    os.symlink(outside / "trap.parquet", land / "trap.parquet")
    os.symlink(outside, land / "elsewhere")
    os.symlink(land / "good.parquet", land / "inside-link.parquet")  # inside: read once, through its real path
    (land / "bad\nname.parquet").write_bytes(b"not parquet at all")
    os.mkfifo(land / "pipe.parquet")

    done = run_cli("ingest", "--db", str(db_path), str(land), timeout=180)
    assert done.returncode == 4, done.stderr  # files rejected: the data-quality alarm
    lines = done.stdout.splitlines()
    assert lines[0] == "7 files: 1 loaded, 1 rejected, 0 already ingested, 5 refused"
    assert lines[1] == "300 rows read: 300 accepted, 0 quarantined, 0 duplicates"
    assert lines[2].startswith(f"  rejected {land}/bad\\nname.parquet: not a readable Parquet file: ")
    outside_real = os.path.realpath(outside)
    assert lines[-1].startswith(f"DATA QUALITY: 1 of 7 files rejected: {land}/bad\\nname.parquet: not a readable ")
    lines = lines[:-1]
    assert sorted(lines[3:-1]) == sorted([
        f"  refused  {land}/elsewhere: a link to a folder outside the landing folder {land} ({outside_real}); "
        "not read",
        f"  refused  {land}/link-to-other.parquet: a link to a file outside the landing folder {land} "
        f"({outside_real}/other.parquet); not read",
        f"  refused  {land}/passwd.parquet: a link to a file outside the landing folder {land} (/etc/passwd); "
        "not read",
        f"  refused  {land}/pipe.parquet: not a regular file; not read",
        f"  refused  {land}/trap.parquet: a link to a file outside the landing folder {land} "
        f"({outside_real}/trap.parquet); not read",
    ])
    assert lines[-1].startswith("rollup ")
    assert done.stderr == f"pipeline ingest: created a new warehouse at {db_path}\n"
    assert [(Path(p).name, s, r) for p, s, r, _ in files_rows(db_path)] == [
        ("bad\nname.parquet", "rejected", 0), ("good.parquet", "loaded", 300)]
    assert counts(db_path)["events"] == 300

    again = run_cli("ingest", "--db", str(db_path), "--json", str(land), timeout=180)
    assert again.returncode == 4, again.stderr  # the bad file is still there, still rejected
    out = json.loads(again.stdout)
    assert sorted(Path(f["path"]).name for f in out["refused_files"]) == [
        "elsewhere", "link-to-other.parquet", "passwd.parquet", "pipe.parquet", "trap.parquet"]
    assert {f["status"] for f in out["per_file"] if Path(f["path"]).name == "passwd.parquet"} == {"refused"}
    assert counts(db_path)["events"] == 300


# 6. a crash inside the commit, and a full disk: one line with the database and the real cause


def test_a_crash_inside_the_commit_names_the_database_and_the_cause(tmp_path):
    land, db_path = tmp_path / "land", tmp_path / "telemetry.duckdb"
    for i in range(2):
        write(valid_table(500, seed=40 + i), land / f"part-{i}.parquet")
    assert run_cli("init", "--db", str(db_path)).returncode == 0
    done = run_cli("ingest", "--db", str(db_path), str(land), env={"PIPELINE_TEST_FAULT": "checkpoint"})
    assert done.returncode == 2
    assert done.stderr == (
        f"pipeline ingest: error: database {db_path} failed and DuckDB closed it: Failed to create checkpoint "
        "because of error: Checkpoint aborted before header write because of PRAGMA checkpoint_abort flag; what was "
        "committed is kept, run the command again to finish\n")
    c = counts(db_path)  # the first file's commit failed: it is wholly out, and the second was not started
    assert (c["files_loaded"], c["events"], c["rows_read"]) == (0, 0, 0)
    again = run_cli("ingest", "--db", str(db_path), str(land))
    assert again.returncode == 0, again.stderr
    c = counts(db_path)
    assert (c["files_loaded"], c["events"], c["distinct_ids"]) == (2, 1000, 1000)


def test_a_file_size_limit_names_the_database_and_file_too_large(db_copy, tmp_path):
    land = tmp_path / "land"
    write(valid_table(30_000, seed=50), land / "big.parquet")
    before = counts(db_copy)
    limit = 1 << 20  # 1 MiB: the write-ahead log of 30,000 rows is larger

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run([sys.executable, "-m", "pipeline", "ingest", "--db", str(db_copy), str(land)],
                          capture_output=True, text=True, cwd=ROOT, preexec_fn=limited, timeout=240)
    assert done.returncode == 2
    assert done.stderr == (f"pipeline ingest: error: database {db_copy}: could not store the changes: Failed to "
                           f"commit: Could not write file \"{db_copy}.wal\": File too large; nothing of the "
                           "transaction in flight was kept\n")
    assert counts(db_copy) == before
    again = run_cli("ingest", "--db", str(db_copy), str(land))
    assert again.returncode == 0, again.stderr
    assert counts(db_copy)["events"] == before["events"] + 30_000


# 7. any number of signals: exit 130, files wholly in or out


@pytest.mark.parametrize("command", ["ingest", "nightly"])
def test_a_storm_of_signals_exits_130_and_leaves_whole_files(tmp_path, command):
    land, db_path = tmp_path / "land", tmp_path / "telemetry.duckdb"
    FILES = 40  # enough that the storm lands while files are still coming in
    for i in range(FILES):
        write(valid_table(2000, seed=300 + i), land / f"part-{i:02d}.parquet")
    args = [str(land)] if command == "ingest" else ["--landing", str(land)]
    proc = start(command, "--db", str(db_path), "--validate-batch-rows", "1", *args, start_new_session=True)

    def two_loaded() -> bool:
        assert proc.poll() is None, f"pipeline {command} ended before it loaded 2 files: {proc.communicate()}"
        try:
            return counts(db_path)["files_loaded"] >= 2
        except duckdb.Error:  # not a warehouse yet, or a batch is being written
            return False

    wait_until(two_loaded, 180, f"pipeline {command} loaded 2 of its {FILES} files")
    for i in range(6):  # to the whole group, the way Ctrl-C in a terminal and systemd's stop signal it
        os.killpg(proc.pid, signal.SIGTERM if i % 2 else signal.SIGINT)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] in (f"pipeline {command}: {HARD_STOP}", f"pipeline {command}: {SAFE_STOP}")
    assert "Traceback" not in err and "internal error" not in err
    c = counts(db_path)
    assert 2 <= c["files_loaded"] < FILES
    assert c["events"] == c["accepted"] == 2000 * c["files_loaded"]
    unrecorded = False
    if command == "nightly":  # a later signal may land inside the run's own record: then it stays 'running'
        with duckdb.connect(str(db_path), read_only=True) as con:
            (status,) = con.execute("SELECT status FROM runs ORDER BY run_id").fetchone()
        assert status in ("interrupted", "running"), status
        unrecorded = status == "running"
    again = run_cli(command, "--db", str(db_path), *args)
    # the rerun settles a run whose process died unrecorded as aborted, and says so as a data-quality alarm
    assert again.returncode == (4 if unrecorded else 0), again.stderr
    assert ("a previous run was aborted" in again.stdout + again.stderr) == unrecorded
    c = counts(db_path)
    assert (c["files_loaded"], c["events"], c["distinct_ids"]) == (FILES, 2000 * FILES, 2000 * FILES)


# 8. --db whose folder is missing: refused; a new warehouse is explicit


@pytest.mark.parametrize("command", [["ingest"], ["nightly", "--landing"], ["schedule", "--landing"],
                                     ["aggregate"]])
def test_a_db_in_a_missing_folder_is_refused_and_init_creates_it(tmp_path, command):
    land = tmp_path / "land"
    write(valid_table(50, seed=7), land / "a.parquet")
    db_path = tmp_path / "missing" / "dir" / "x.duckdb"
    args = [*command, str(land)] if command != ["aggregate"] else command
    done = run_cli(*args, "--db", str(db_path))
    assert done.returncode == 2
    assert done.stderr == (f"pipeline {command[0]}: error: --db {db_path}: folder {db_path.parent} does not exist; "
                           f"to start a new warehouse there run: pipeline init --db {db_path}\n")
    assert not (tmp_path / "missing").exists()

    made = run_cli("init", "--db", str(db_path))
    assert (made.returncode, made.stdout) == (0, f"created a new warehouse at {db_path}\n")
    again = run_cli("init", "--db", str(db_path))
    assert (again.returncode, again.stdout) == (0, f"{db_path} is already a warehouse; its tables are in place\n")
    done = run_cli("sql", "--db", str(db_path), "--format", "csv", "SELECT count(*) AS n FROM events")
    assert (done.returncode, done.stdout) == (0, "n\n0\n")


def test_a_warehouse_of_an_older_version_is_named_to_readers_and_init_brings_it_up_to_date(tmp_path):
    from pipeline.warehouse import snapshots

    db_path, land = tmp_path / "t.duckdb", tmp_path / "land"
    write(valid_table(200, seed=3), land / "a.parquet")
    assert run_cli("ingest", "--db", str(db_path), str(land)).returncode == 0
    with duckdb.connect(str(db_path)) as con:  # as an earlier version left it: a table missing, its own DDL
        con.execute("DROP TABLE routing_publishes")
        con.execute("UPDATE pipeline_ddl SET digest = 'an earlier version'")
    snapshots.publish(db_path)  # and its snapshot, which `serve` prefers
    said = (f"error: database {db_path} was written by another version of pipeline: its tables are not this "
            f"version's; bring them up to date with: pipeline init --db {db_path}\n")
    for command in (["metrics"], ["runs"], ["serve", "--port", str(free_port())]):
        done = run_cli(*command, "--db", str(db_path))
        assert (done.returncode, done.stderr) == (2, f"pipeline {command[0]}: {said}"), done.stderr
    assert run_cli("init", "--db", str(db_path)).returncode == 0
    assert run_cli("metrics", "--db", str(db_path)).returncode == 0
    with duckdb.connect(str(snapshots.newest(db_path).path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM routing_publishes").fetchone() == (0,)


# 9. webhook delivery: one deadline per run, Retry-After capped by it, no lock held on the network


class Hook(LocalHttp):
    """A webhook receiver on 127.0.0.1; `answer(body)` returns the status and headers to send."""

    def __init__(self, answer):
        self.calls: list[dict] = []
        self.answer = answer
        super().__init__(self.post, "/hook")

    def post(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        self.calls.append(body)
        code, headers = self.answer(body)
        handler.send_response(code)
        for k, v in headers.items():
            handler.send_header(k, v)
        handler.end_headers()


def webhook_config(tmp_path: Path, url: str, **alerts) -> Path:
    raw = yaml.safe_load((ROOT / "gates" / "admission.yaml").read_text())
    raw["alerts"].update({"webhook_url": url, "stdout": False, **alerts})
    path = tmp_path / "admission.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def alert_rows(db_path: Path) -> list[tuple]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute("SELECT release, sink, status, last_error FROM alerts ORDER BY release").fetchall()
    finally:
        con.close()


def test_retry_after_past_the_delivery_deadline_keeps_the_alerts_for_the_next_run(db_copy, tmp_path):
    hook = Hook(lambda body: (429, {"Retry-After": "100"}))
    try:
        config = webhook_config(tmp_path, hook.url, delivery_deadline_s=5, webhook_retries=3)
        landing = tmp_path / "empty-landing"
        landing.mkdir()
        done, took = elapsed("nightly", "--db", str(db_copy), "--landing", str(landing), "--config", str(config))
    finally:
        hook.close()
    assert done.returncode == 2
    assert took < 60, took  # not 100 s per try, not one wait per alert
    assert len(hook.calls) == 1  # the receiver said "not for 100 s": the second alert is not even tried
    why = ("webhook answered 429 Too Many Requests with Retry-After 100 s; waiting 100 s more would pass the "
           "delivery deadline of 5 s (alerts.delivery_deadline_s)")
    untried = f"not sent: {why}"
    assert f"  alerts     0 delivered, 2 pending, 0 failed\n  webhook: {why}; kept for the next run\n" \
           f"  webhook: {untried}; kept for the next run\n" in done.stdout
    assert sorted(r[2:] for r in alert_rows(db_copy)) == [("pending", untried), ("pending", why)]


def test_the_writer_lock_is_free_while_a_slow_webhook_answers(db_copy, tmp_path):
    seen = []

    def slow(body):
        fd = os.open(f"{db_copy}.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another writer could take it now
            fcntl.flock(fd, fcntl.LOCK_UN)
            con = duckdb.connect(str(db_copy), read_only=True)  # and a reader can open the file
            seen.append(con.execute("SELECT count(*) FROM events").fetchone()[0])
            con.close()
        except (BlockingIOError, duckdb.Error) as exc:
            seen.append(repr(exc))
        finally:
            os.close(fd)
        time.sleep(1.0)
        return 200, {}

    hook = Hook(slow)
    try:
        config = webhook_config(tmp_path, hook.url, webhook_timeout_s=10)
        landing = tmp_path / "empty-landing"
        landing.mkdir()
        done = run_cli("nightly", "--db", str(db_copy), "--landing", str(landing), "--config", str(config))
    finally:
        hook.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert seen == [800, 800]
    assert [(r, s) for r, _, s, _ in alert_rows(db_copy)] == [("4.11", "delivered"), ("4.12", "delivered")]
    assert sorted(c["release"] for c in hook.calls) == ["4.11", "4.12"]


# 10. APScheduler's own warnings stay JSON under --log-format json


def test_scheduler_warnings_are_json_lines_under_log_format_json(tmp_path):
    land, db_path, log = tmp_path / "land", tmp_path / "telemetry.duckdb", tmp_path / "stderr.log"
    write(valid_table(300, seed=9), land / "a.parquet")
    with log.open("w") as stderr:  # a file, to be read while the scheduler runs
        proc = start("--log-format", "json", "schedule", "--db", str(db_path), "--landing", str(land),
                     "--interval-seconds", "0.5", stderr=stderr)

    def skipped(records: list[dict]) -> list[dict]:
        return [r for r in records if r.get("logger") == "apscheduler.scheduler"
                and "skipped: maximum number of running instances reached (1)" in r["event"]]

    def ingested(records: list[dict]) -> bool:
        return any(r.get("event") == "nightly" and r.get("step") == "ingest" for r in records)

    def both_logged() -> bool:
        assert proc.poll() is None, f"the scheduler ended: {log.read_text()}"
        records = [json.loads(line) for line in log.read_text().splitlines(keepends=True)
                   if line.endswith("\n") and line.startswith("{")]  # whole lines; any other fails below
        return bool(skipped(records)) and ingested(records)

    try:  # the first run loads Great Expectations: several fire times pass, each skipped
        wait_until(both_logged, 180, "the scheduler logged a skipped fire time and a nightly's ingest step",
                   every=0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    err = log.read_text()
    assert proc.returncode == 0, err
    records = [json.loads(line) for line in err.splitlines()]  # every line is JSON
    assert skipped(records)[0]["level"] == "warning"
    assert ingested(records)


# 12. how long to wait for a busy database, and how to change it


def test_the_busy_wait_is_configurable_and_the_message_says_how_long(db_copy):
    holder = duckdb.connect(str(db_copy))  # this process holds the file read-write
    try:
        _, startup = elapsed("sql", "--db", "/nonexistent.duckdb", "SELECT 1")
        done, took = elapsed("--busy-timeout", "1", "sql", "--db", str(db_copy), "SELECT 1")
        assert done.returncode == 2
        assert done.stderr == (f"pipeline sql: error: database {db_copy} is held by another writer "
                               f"(PID {os.getpid()}); waited 1 s; try again when it finishes, or wait longer with "
                               "--busy-timeout SECONDS (or PIPELINE_BUSY_TIMEOUT)\n")
        assert took < startup + 1 + 3, (took, startup)
        done = run_process("gate", "--db", str(db_copy), "--release", "4.12", env={"PIPELINE_BUSY_TIMEOUT": "0.5"})
        assert done.returncode == 2
        assert "is held by another writer" in done.stderr and "; waited 0.5 s; " in done.stderr
        done = run_cli("sql", "--db", str(db_copy), "SELECT 1", env={"PIPELINE_BUSY_TIMEOUT": "soon"})
        assert (done.returncode, done.stderr) == (
            2, "pipeline sql: error: PIPELINE_BUSY_TIMEOUT='soon' is not a number of seconds\n")
    finally:
        holder.close()
    assert counts(db_copy)["events"] == 800
