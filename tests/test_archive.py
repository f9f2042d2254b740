"""Raw events age out of the DuckDB file into the archive's Delta tables (pipeline/warehouse/archive.py): the
archive holds exactly the rows that left, a kill at each step loses and doubles nothing, late rows of an archived
day are quarantined, ad hoc SQL reads both as one relation, and DuckDB, polars and an s3:// archive work without
the pipeline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import boto3
import duckdb
import polars as pl
import pyarrow as pa
import pytest
import yaml
from botocore.config import Config as BotoConfig
from conftest import AZURITE_KEY, ROOT, azure_env, query, run_cli, s3_env, valid_table, write
from deltalake import DeltaTable
from test_output_schema import _validator

AS_OF = datetime(2026, 12, 10)
DAYS = [AS_OF.date() - timedelta(days=k) for k in range(8, 0, -1)]  # 2026-12-02 .. 2026-12-09
ROWS = 150  # per release and day
# the file keeps 3 whole days before --as-of: 2026-12-07 .. 2026-12-09; 12-02 .. 12-06 move
KEPT_DAYS = 3
PER_DAY = "SELECT release, CAST(event_time AS DATE) AS day, count(*), sum(hash(*COLUMNS(*))) FROM {} GROUP BY ALL"


def _config(tmp_path: Path, **archive: object) -> Path:
    raw = yaml.safe_load((ROOT / "gates" / "admission.yaml").read_text())
    raw["window_days"] = 2
    raw["gates"]["retention"]["horizon_days"] = 1
    raw["archive"] = {"raw_events_days": KEPT_DAYS, "quarantine_days": KEPT_DAYS, "device_day_days": 3, **archive}
    path = tmp_path / "gates.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _landing(tmp_path: Path) -> Path:
    landing = tmp_path / "landing"
    for r, release in enumerate(("4.11", "4.12")):
        for d, day in enumerate(DAYS):
            table = valid_table(ROWS, seed=100 * r + d, start=datetime.combine(day, datetime.min.time()))
            table = table.set_column(table.column_names.index("release"), "release", pa.array([release] * ROWS))
            write(table, landing / f"{release}-{day}.parquet")
    return landing


@pytest.fixture
def warehouse(tmp_path: Path) -> tuple[Path, Path]:
    db, config = tmp_path / "t.duckdb", _config(tmp_path)
    proc = run_cli("ingest", str(_landing(tmp_path)), "--db", str(db), "--config", str(config),
                   "--as-of", AS_OF.isoformat())
    assert proc.returncode == 0, proc.stderr
    return db, config


def _archive(db: Path, config: Path) -> dict:
    proc = run_cli("archive", "--db", str(db), "--config", str(config), "--as-of", AS_OF.isoformat(), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    _validator("archive").validate(out)
    return out


def _all_events(db: Path, config: Path, sql: str) -> list[list]:
    proc = run_cli("sql", sql, "--db", str(db), "--config", str(config), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return [list(r.values()) for r in json.loads(proc.stdout)]


RAW_NAMED_QUERIES = ("edge_vs_cloud_latency", "memory_by_tier", "thermal")


def _named(db: Path, config: Path, name: str) -> list[dict]:
    proc = run_cli("query", name, "--param", "release=4.12", "--db", str(db), "--config", str(config),
                   "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_archive_holds_exactly_the_rows_that_left_and_every_reader_sees_each_row_once(warehouse):
    db, config = warehouse
    before = sorted(query(db, PER_DAY.format("events")))
    assert len(before) == 16 and sum(r[2] for r in before) == 2 * 8 * ROWS
    named_before = {name: _named(db, config, name) for name in RAW_NAMED_QUERIES}
    assert all(len(rows) > 1 for rows in named_before.values())

    moved = _archive(db, config)
    assert (moved["event_days_moved"], moved["event_rows_moved"]) == (10, 10 * ROWS)  # 5 days x 2 releases
    assert moved["quarantine_rows_moved"] == 0 and moved["location"] == f"{db}.archive"
    assert sorted({r[1] for r in query(db, PER_DAY.format("events"))}) == DAYS[-KEPT_DAYS:]
    ledger = query(db, "SELECT release, day, rows, checksum FROM archived_days WHERE kind = 'events' ORDER BY ALL")
    assert ledger == [(r, d, n, str(h)) for r, d, n, h in before if d < DAYS[-KEPT_DAYS]]

    # without the pipeline: DuckDB over delta-rs's Arrow dataset, and polars
    archived = DeltaTable(f"{db}.archive/events").to_pyarrow_dataset()
    con = duckdb.connect()
    con.register("archived", archived)
    got = con.sql("SELECT release, day, count(*), sum(hash(*COLUMNS(* EXCLUDE (day)))) FROM archived "
                  "GROUP BY ALL ORDER BY ALL").fetchall()
    assert got == [r for r in before if r[1] < DAYS[-KEPT_DAYS]]
    frame = pl.scan_delta(f"{db}.archive/events").filter(pl.col("release") == "4.12").collect()
    assert frame.height == 5 * ROWS and frame["event_id"].n_unique() == 5 * ROWS

    # one relation for ad hoc SQL: the same per-day figures as before the move
    assert sorted(map(tuple, _all_events(db, config, PER_DAY.format("all_events").replace(
        "*COLUMNS(*)", "*COLUMNS(* EXCLUDE (day))")))) == [(r, d.isoformat(), n, h) for r, d, n, h in before]
    # the named queries over raw rows read every day too: the same answer as before the move
    assert {name: _named(db, config, name) for name in RAW_NAMED_QUERIES} == named_before
    again = _archive(db, config)
    assert (again["event_days_moved"], again["event_rows_moved"]) == (0, 0)


@pytest.mark.parametrize("step", ["written", "verified"])
def test_a_kill_at_each_step_of_a_move_loses_and_doubles_nothing(warehouse, step):
    db, config = warehouse
    before = sorted(query(db, PER_DAY.format("events")))
    with subprocess.Popen([sys.executable, "-m", "pipeline", "archive", "--db", str(db), "--config", str(config),
                           "--as-of", AS_OF.isoformat()], env={**os.environ, "PIPELINE_TEST_FAULT": f"archive-{step}"},
                          stderr=subprocess.PIPE, text=True) as proc:
        line = proc.stderr.readline()
        assert line.startswith(f"test fault: the move stopped after it was {step}"), line
        proc.send_signal(signal.SIGKILL)
    # the first day is in the Delta table; the file still has it, and archived_days does not list it
    assert DeltaTable(f"{db}.archive/events").to_pyarrow_dataset().count_rows() == ROWS
    assert query(db, "SELECT count(*) FROM archived_days") == [(0,)]
    during = _all_events(db, config, "SELECT count(*), count(DISTINCT event_id) FROM all_events")
    assert during == [[2 * 8 * ROWS, 2 * 8 * ROWS]]

    moved = _archive(db, config)
    assert moved["event_days_moved"] == 10
    assert DeltaTable(f"{db}.archive/events").to_pyarrow_dataset().count_rows() == 10 * ROWS  # the day once
    after = _all_events(db, config, PER_DAY.format("all_events").replace("*COLUMNS(*)", "*COLUMNS(* EXCLUDE (day))"))
    assert sorted(map(tuple, after)) == [(r, d.isoformat(), n, h) for r, d, n, h in before]


def test_late_rows_of_an_archived_day_are_quarantined_and_its_rollup_stays(warehouse, tmp_path):
    db, config = warehouse
    _archive(db, config)
    rollup = "SELECT day, sum(rows) FROM rollup_daily WHERE release = '4.12' GROUP BY ALL ORDER BY ALL"
    before = query(db, rollup)
    late = valid_table(40, seed=900, start=datetime.combine(DAYS[0], datetime.min.time()))  # archived day
    recent = valid_table(60, seed=901, start=datetime.combine(DAYS[-1], datetime.min.time()))  # a day in the file
    write(pa.concat_tables([late, recent]), tmp_path / "late" / "late.parquet")
    proc = run_cli("ingest", str(tmp_path / "late"), "--db", str(db), "--config", str(config),
                   "--as-of", AS_OF.isoformat(), "--json")
    assert proc.returncode == 4, proc.stderr  # 40 % quarantined: the data-quality alarm
    result = json.loads(proc.stdout)
    assert (result["accepted"], result["quarantined"], result["duplicates"]) == (60, 40, 0)
    assert query(db, "SELECT rules, count(*) FROM quarantine GROUP BY ALL") == [(["day_archived"], 40)]
    after = dict(query(db, rollup))
    assert after[DAYS[0]] == dict(before)[DAYS[0]]  # the archived day's rollup is final
    assert after[DAYS[-1]] == dict(before)[DAYS[-1]] + 60


def test_a_full_rebuild_keeps_the_rollups_of_archived_days(warehouse):
    db, config = warehouse
    _archive(db, config)
    rollup = "SELECT * EXCLUDE (updated_at) FROM rollup_daily ORDER BY ALL"
    before = query(db, rollup)
    proc = run_cli("aggregate", "--full", "--db", str(db), "--config", str(config), "--as-of", AS_OF.isoformat())
    assert proc.returncode == 0, proc.stderr
    assert query(db, rollup) == before
    assert {r[1] for r in before} >= set(DAYS)  # every day, archived or not, has its rollup rows


def test_the_device_day_rollup_keeps_its_own_days(warehouse):
    db, config = warehouse
    moved = _archive(db, config)
    assert moved["device_day_rows_dropped"] > 0
    assert query(db, "SELECT min(day) FROM rollup_device_day") == [(DAYS[-3],)]


def test_a_retention_shorter_than_the_gate_reads_is_refused_naming_both_keys(tmp_path):
    config = _config(tmp_path, raw_events_days=1)
    proc = run_cli("gate", "--check-config", "--config", str(config))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"pipeline gate: error: {config}: archive.raw_events_days (1) is shorter than "
                                   "the gate reads: window_days (2) needs at least 2 days")
    config = _config(tmp_path, device_day_days=2)
    proc = run_cli("gate", "--check-config", "--config", str(config))
    assert proc.stderr.strip() == (f"pipeline gate: error: {config}: archive.device_day_days (2) is shorter than "
                                   "the gate reads: window_days (2) + gates.retention.horizon_days (1) needs at "
                                   "least 3 days")


def test_the_gate_judges_alike_before_and_after_the_days_before_its_window_move(demo_dir, tmp_path):
    db = tmp_path / "t.duckdb"
    db.write_bytes((demo_dir / "telemetry.duckdb").read_bytes())
    config = _config(tmp_path)  # window_days 2; raw events of days before 2026-11-28 move at --as-of 12-01
    gate = ("gate", "--release", "4.12", "--db", str(db), "--config", str(config), "--as-of", "2026-12-01", "--json")

    def judged() -> dict:
        out = json.loads(run_cli(*gate).stdout)
        return {k: v for k, v in out.items() if k not in ("evaluated_at", "snapshot", "evaluation_id")}

    before = judged()
    proc = run_cli("archive", "--db", str(db), "--config", str(config), "--as-of", "2026-12-01", "--json")
    assert json.loads(proc.stdout)["event_days_moved"] == 8  # 4.11 and 4.12, 2026-11-24 .. 11-27
    assert judged() == before


def _s3_bucket(endpoint: str) -> tuple[Callable[[], list[str]], dict[str, str]]:
    """moto's S3 (its credentials in the environment): the archive bucket's keys, a delta-rs reader's options."""
    client = boto3.client("s3", endpoint_url=endpoint, config=BotoConfig(s3={"addressing_style": "path"}))
    client.create_bucket(Bucket="archive")
    return (lambda: [o["Key"] for o in client.list_objects_v2(Bucket="archive")["Contents"]],
            {"aws_endpoint_url": endpoint, "aws_allow_http": "true", "aws_region": "us-east-1"})


def _az_container(endpoint: str) -> tuple[Callable[[], list[str]], dict[str, str]]:
    """Azurite, as _s3_bucket; the reader names the account as any delta-rs reader does."""
    from azure.storage.blob import BlobServiceClient

    container = BlobServiceClient.from_connection_string(os.environ["AZURE_STORAGE_CONNECTION_STRING"]) \
        .create_container("archive")
    return (lambda: [b.name for b in container.list_blobs()],
            {"account_name": "devstoreaccount1", "account_key": AZURITE_KEY, "endpoint": endpoint,
             "allow_http": "true"})


@pytest.mark.parametrize(("scheme", "emulator", "env", "store"), [
    ("s3", "s3_endpoint", s3_env, _s3_bucket), ("az", "azurite_endpoint", azure_env, _az_container)])
def test_an_archive_in_a_bucket_on_its_emulator(scheme, emulator, env, store, warehouse, request, monkeypatch,
                                                tmp_path):
    db, _ = warehouse
    endpoint = request.getfixturevalue(emulator)
    for key, value in env(endpoint).items():
        monkeypatch.setenv(key, value)
    keys, options = store(endpoint)
    before = sorted(query(db, PER_DAY.format("events")))
    missing = _config(tmp_path, location=f"{scheme}://no-such-bucket/telemetry")
    failed = run_cli("archive", "--db", str(db), "--config", str(missing), "--as-of", AS_OF.isoformat())
    assert failed.returncode == 2 and len(failed.stderr.splitlines()) == 1, failed.stderr
    assert failed.stderr.startswith(f"pipeline archive: error: archive {scheme}://no-such-bucket/telemetry/events: ")
    assert sorted(query(db, PER_DAY.format("events"))) == before  # nothing left the file
    config = _config(tmp_path, location=f"{scheme}://archive/telemetry")
    moved = _archive(db, config)
    assert (moved["event_rows_moved"], moved["location"], moved["archive_bytes"]) == (
        10 * ROWS, f"{scheme}://archive/telemetry", None)
    assert any(k.startswith("telemetry/events/_delta_log/") for k in keys())
    assert DeltaTable(f"{scheme}://archive/telemetry/events", storage_options=options).to_pyarrow_dataset() \
        .count_rows() == 10 * ROWS
    after = _all_events(db, config, PER_DAY.format("all_events").replace("*COLUMNS(*)", "*COLUMNS(* EXCLUDE (day))"))
    assert sorted(map(tuple, after)) == [(r, d.isoformat(), n, h) for r, d, n, h in before]


def test_a_gs_archive_is_refused_naming_the_key(tmp_path):
    location = "gs://archive/telemetry"
    config = _config(tmp_path, location=location)
    done = run_cli("archive", "--db", str(tmp_path / "t.duckdb"), "--config", str(config))
    assert done.returncode == 2
    assert done.stderr == (f"pipeline archive: error: {config}: archive.location: {location!r}: the archive is a "
                           "folder, s3://bucket/prefix or az://container/prefix; gs:// archives are not supported "
                           "yet (docs/archive.md)\n")


def _differences(db: Path) -> dict[str, tuple[int, int]]:
    """Per table: rows of the warehouse missing from its newest snapshot and rows of the snapshot it lacks."""
    (snapshot,) = sorted(Path(f"{db}.snapshots").glob("*.duckdb"))[-1:]
    con = duckdb.connect()
    con.execute("ATTACH $p AS w (READ_ONLY)", {"p": str(db)})
    con.execute("ATTACH $p AS s (READ_ONLY)", {"p": str(snapshot)})
    found = {}
    for (table,) in con.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'w'").fetchall():
        if table in ("events", "quarantine"):
            assert con.sql(f"SELECT count(*) FROM s.{table}").fetchall() == [(0,)]  # columns, no rows
            continue
        ours = con.sql(f"SELECT count(*) FROM (FROM w.{table} EXCEPT ALL FROM s.{table})").fetchall()[0][0]
        theirs = con.sql(f"SELECT count(*) FROM (FROM s.{table} EXCEPT ALL FROM w.{table})").fetchall()[0][0]
        if ours or theirs:
            found[table] = (ours, theirs)
    con.close()
    return found


def test_each_snapshot_holds_every_table_but_the_raw_rows_as_the_warehouse_does(warehouse, tmp_path):
    db, config = warehouse
    assert _differences(db) == {}  # the first: built whole
    _archive(db, config)  # days move, device-day rows go: built from the previous snapshot and the changed days
    assert _differences(db) == {}
    recent = valid_table(60, seed=902, start=datetime.combine(DAYS[-1], datetime.min.time()))
    write(recent, tmp_path / "l" / "x.parquet")
    assert run_cli("ingest", str(tmp_path / "l"), "--db", str(db), "--config", str(config),
                   "--as-of", AS_OF.isoformat()).returncode == 0
    assert _differences(db) == {}
    assert run_cli("aggregate", "--full", "--db", str(db), "--config", str(config),
                   "--as-of", AS_OF.isoformat()).returncode == 0
    assert _differences(db) == {}
    assert query(db, "SELECT count(*) FROM rollup_daily")[0][0] > 0
