"""The Spark engine beside DuckDB on the same simulated releases (marker `spark`): ingest counts, every rollup
figure and every gate decision equal; quantiles within the sketch's error where the sketch is used; the gate
scenarios of `pipeline simulate` with the same verdicts and exit codes.

One local Spark session for the whole test run (the `spark_engine` fixture) and small data (about 100k rows),
because starting a session takes 10-20 s and the driver about 2 GB. Without pyspark or Java the tests fail,
saying why (`make test-spark` installs both); under `make test-core` they skip, saying why.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import shutil
from contextlib import redirect_stderr, redirect_stdout
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import PARTIAL, free_port, run_cli, valid_table, with_values, write

from pipeline.cli import main as cli
from pipeline.common.config import EngineSettings, SparkSettings, load_config
from pipeline.gate.evaluate import evaluate_gate
from pipeline.jobs.nightly import run_nightly
from pipeline.planning.simulate import write_parquet
from pipeline.warehouse import db
from pipeline.warehouse.aggregate import use_settings

pytestmark = pytest.mark.spark

START = datetime(2026, 11, 20)
AS_OF = datetime(2026, 11, 27)
MASTER = "local[2]"
BASE = load_config()
LOCAL = SparkSettings(master=MASTER, driver_memory="1g", shuffle_partitions=4)
CONFIG = dataclasses.replace(BASE, engine=EngineSettings(spark=LOCAL))
E = CONFIG.engine.sketch_relative_error
MIDDAY = datetime(2026, 11, 26, 14, 14)  # a CI gate in the middle of a day: both engines judge whole days
# release -> (scenario, rows, verdict, exit code): the gate scenarios of `pipeline simulate`
SCENARIOS = {
    "4.20": ("healthy", 30_000, "keep_edge", 0),
    "4.21": ("postmortem", 30_000, "rollback_to_cloud", 1),
    "4.22": ("low_tier_memory", 30_000, "partial_rollback", 1),
    "4.23": ("sparse", 1_000, "insufficient_data", 3),
}


def _spark_or_skip() -> None:
    import importlib.util

    why = None
    if importlib.util.find_spec("pyspark") is None:
        why = "pyspark is not installed (pip install -e '.[test,spark]')"
    elif not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        why = "Java 17 is not installed (apt-get install openjdk-17-jre-headless)"
    if why:
        if PARTIAL:
            pytest.skip(why)
        pytest.fail(f"the Spark tests cannot run: {why}; make test-spark installs both", pytrace=False)


@pytest.fixture(scope="session")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The four scenarios with rows that break rules, two files sharing event_ids (one copy invalid), a file
    that is not Parquet and one that lacks a required column."""
    land = tmp_path_factory.mktemp("spark") / "landing"
    for i, (release, (scenario, rows, _, _)) in enumerate(SCENARIOS.items()):
        write_parquet(land, release, rows, scenario, seed=10 + i, start=START, days=7, files=2,
                      bad_rows=rows // 500)
    shared = valid_table(300, seed=5, start=datetime(2026, 11, 22))
    write(shared, land / "extra" / "a.parquet")
    write(with_values(shared, 3, total_ms=-1.0), land / "extra" / "b.parquet")  # same ids, one copy invalid
    write(shared.drop(["device_id"]), land / "extra" / "no_device.parquet")
    (land / "extra" / "junk.parquet").write_bytes(b"not parquet at all")
    return land


@pytest.fixture(scope="session")
def spark_engine(tmp_path_factory: pytest.TempPathFactory):
    """The Spark engine on the one local session of this test run, with its own bookkeeping file."""
    _spark_or_skip()
    from pipeline.warehouse.spark.engine import open_engine

    folder = tmp_path_factory.mktemp("spark-warehouse")
    return open_engine(folder / "spark.duckdb", CONFIG)


@pytest.fixture(scope="session")
def nightlies(landing: Path, spark_engine, tmp_path_factory: pytest.TempPathFactory):
    """The nightly job once per engine on the same landing folder (ingest, rollup with histograms, gates)."""
    duck = tmp_path_factory.mktemp("duck") / "duck.duckdb"
    duck_run, duck_results = run_nightly(duck, landing, CONFIG, as_of=AS_OF)
    spark_run, spark_results = run_nightly(spark_engine.db_path, landing, CONFIG, as_of=AS_OF, engine=spark_engine)
    return duck, (duck_run, duck_results), (spark_run, spark_results)


def _rows(db_path: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db_path), read_only=True) as con:
        return con.execute(sql).fetchall()


def _close(a, b, rel: float = 1e-12) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-300) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    return a == b


def test_nightly_runs_ok_on_both_engines_with_the_same_verdicts(nightlies):
    _, (duck_run, _), (spark_run, _) = nightlies
    assert (duck_run.status, spark_run.status) == ("ok", "ok"), (duck_run.error, spark_run.error)
    assert spark_run.verdicts == duck_run.verdicts
    assert {r: duck_run.verdicts[r] for r in SCENARIOS} == {r: v[2] for r, v in SCENARIOS.items()}
    assert spark_run.data_quality == duck_run.data_quality  # the rejected files raise the same alarm


def test_ingest_stores_the_same_manifest_quarantine_and_events(nightlies, spark_engine):
    duck = nightlies[0]
    manifest = ("SELECT file_id, path, status, rows_read, accepted, quarantined, duplicates, reason, extra_columns, "
                "missing_columns FROM files ORDER BY path")
    duck_files, spark_files = _rows(duck, manifest), _rows(spark_engine.db_path, manifest)
    assert spark_files == duck_files
    statuses = [(Path(p).name, s) for _, p, s, *_ in duck_files if s != "loaded"]
    assert sorted(statuses) == [("junk.parquet", "rejected"), ("no_device.parquet", "rejected")]
    totals = _rows(duck, "SELECT sum(rows_read), sum(accepted), sum(quarantined), sum(duplicates) FROM files")[0]
    assert totals[2] > 0 and totals[3] == 299  # every row of b.parquet but the invalid one is a duplicate
    assert _rows(duck, "SELECT file_id, rule, success, element_count, unexpected_count FROM validations "
                       "JOIN files USING (file_id) ORDER BY path, rule").__len__() > 0
    per_rule = ("SELECT f.path, v.rule, v.success, v.element_count, v.unexpected_count FROM validations v "
                "JOIN files f USING (file_id) ORDER BY 1, 2")
    assert _rows(spark_engine.db_path, per_rule) == _rows(duck, per_rule)

    q_duck = sorted(_rows(duck, "SELECT source_file, row_in_file, rules FROM quarantine"))
    q_spark = sorted((r["source_file"], r["row_in_file"], list(r["rules"])) for r in
                     spark_engine.table("quarantine").select("source_file", "row_in_file", "rules").collect())
    assert q_spark == [(s, r, list(rules)) for s, r, rules in q_duck] and len(q_duck) == totals[2]

    key = "SELECT e.event_id, f.path, e.event_time, e.total_ms FROM events e JOIN files f USING (file_id)"
    duck_events = sorted(_rows(duck, key))
    paths = dict(_rows(spark_engine.db_path, "SELECT file_id, path FROM files"))
    spark_events = sorted((r["event_id"], paths[r["file_id"]], r["event_time"], r["total_ms"]) for r in
                          spark_engine.table("events").select("event_id", "file_id", "event_time", "total_ms")
                          .collect())
    assert len(spark_events) == len(duck_events) == totals[1]
    assert spark_events == duck_events
    root = Path(spark_engine.warehouse.base)  # published: only the tables, nothing left in staging
    assert sorted(p.name for p in root.iterdir()) == ["_staging", "events", "quarantine", "rollup_daily",
                                                      "rollup_device_day", "rollup_hist"]
    assert list((root / "_staging").iterdir()) == []


def test_rollup_figures_and_histograms_are_equal(nightlies, spark_engine):
    duck = nightlies[0]
    with duckdb.connect(str(duck), read_only=True) as con:
        cur = con.execute("SELECT * EXCLUDE (updated_at) FROM rollup_daily")
        cols = [d[0] for d in cur.description]
        duck_rows = {tuple(r[:6]): dict(zip(cols, r, strict=True)) for r in cur.fetchall()}
        duck_hist = sorted(con.execute("SELECT release, day, task, route, device_tier, network_bucket, figure, bin, n "
                                       "FROM rollup_hist WHERE figure <> 'lag'").fetchall())  # lag: DuckDB only
    spark_rows = {}
    for r in spark_engine.table("rollup_daily").drop("updated_at", "date").collect():
        d = r.asDict()
        spark_rows[tuple(d[c] for c in cols[:6])] = {c: d[c] for c in cols}
    assert spark_rows.keys() == duck_rows.keys() and len(duck_rows) > 500
    worst = 0.0
    for key, d in duck_rows.items():
        s = spark_rows[key]
        for c in cols:
            if isinstance(d[c], float) and d[c] and s[c] is not None:
                worst = max(worst, abs(s[c] - d[c]) / abs(d[c]))
            assert _close(s[c], d[c], rel=1e-13), (key, c, s[c], d[c])  # counts and rates: identical
    assert worst <= 1e-13
    spark_hist = sorted(tuple(r) for r in spark_engine.table("rollup_hist").select(
        "release", "day", "task", "route", "device_tier", "network_bucket", "figure", "bin", "n").collect())
    assert spark_hist == duck_hist and len(duck_hist) > 10_000
    with duckdb.connect(str(duck), read_only=True) as con:
        cur = con.execute("SELECT * FROM rollup_device_day")
        cols = [d[0] for d in cur.description]
        duck_days = sorted(tuple(_plain(v) for v in r) for r in cur.fetchall())
    spark_days = sorted(tuple(_plain(r[c]) for c in cols) for r in spark_engine.table("rollup_device_day").collect())
    assert len(spark_days) == len(duck_days) > 10_000
    for s, d in zip(spark_days, duck_days, strict=True):
        assert _close(list(s), list(d), rel=1e-12), (s, d)


def _plain(value):
    return list(value) if isinstance(value, list | tuple) else value


@pytest.fixture(scope="session")
def gates(nightlies, spark_engine):
    """(as_of, release) -> (DuckDB's GateResult, Spark's), each evaluated once for the tests below."""
    out = {}
    for as_of in (AS_OF, MIDDAY):
        for release in SCENARIOS:
            with db.reading(nightlies[0]) as con:
                use_settings(con, CONFIG)
                duck_result = evaluate_gate(con, release, CONFIG, as_of=as_of)
            out[(as_of, release)] = duck_result, evaluate_gate(spark_engine, release, CONFIG, as_of=as_of)
    return out


def _comparable(result) -> dict:
    d = result.to_dict()
    d.pop("evaluated_at")
    d["quantiles"].pop("engine")
    d["window"].pop("arrival_lag_hours")  # measured on DuckDB only (the Spark engine keeps no row-to-file time)
    return d


def _differences(a, b, path: str = "", rel: float = 1e-12) -> list[str]:
    """Where _close(a, b) fails, for the failure message."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(a.keys() | b.keys()) for d in _differences(a.get(k), b.get(k), f"{path}.{k}", rel)]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]", rel)]
    return [] if _close(a, b, rel) else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.parametrize("as_of", [AS_OF, MIDDAY])
def test_gate_decisions_and_figures_are_equal(gates, as_of):
    for release in SCENARIOS:
        duck_result, spark_result = gates[(as_of, release)]
        if as_of == AS_OF:
            assert (duck_result.verdict, duck_result.exit_code) == SCENARIOS[release][2:], release
        assert (spark_result.verdict, spark_result.exit_code) == (duck_result.verdict, duck_result.exit_code)
        assert spark_result.quantiles == {"estimator": "log_histogram", "relative_error": E, "engine": "spark"}
        assert spark_result.source.kind == duck_result.source.kind == "rollup"
        a, b = _comparable(duck_result), _comparable(spark_result)
        assert a["window"] == b["window"] and a["window"]["end"] == f"{as_of:%Y-%m-%d}T00:00:00Z"
        assert [(s["rows"], s["decision"], s["failed_gates"]) for s in b["segments"]] == \
            [(s["rows"], s["decision"], s["failed_gates"]) for s in a["segments"]]
        # every count, rate and p95 (the same histograms) identical up to float summation order
        assert _close(b, a, rel=1e-12), (release, _differences(b, a)[:10])


def _cli(*args: str) -> tuple[int, str, str]:
    """The real command line in this process (the Spark session is reused: one per test run)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_cli_gate_gives_the_same_verdicts_and_exit_codes_on_both_engines(nightlies, spark_engine):
    duck = nightlies[0]
    spark = ["--engine", "spark", "--spark-master", MASTER, "--warehouse", str(spark_engine.warehouse)]
    for release, (_, _, verdict, code) in SCENARIOS.items():
        common = ["gate", "--release", release, "--as-of", "2026-11-27", "--dry-run", "--json"]
        duck_code, duck_out, duck_err = _cli(*common, "--db", str(duck))
        spark_code, spark_out, spark_err = _cli(*common, "--db", str(spark_engine.db_path), *spark)
        assert (duck_code, spark_code) == (code, code), (duck_err, spark_err)
        d, s = json.loads(duck_out), json.loads(spark_out)
        assert d["verdict"] == s["verdict"] == verdict
        assert d["quantiles"]["estimator"] == s["quantiles"]["estimator"] == "log_histogram"
        assert [x["decision"] for x in d["segments"]] == [x["decision"] for x in s["segments"]]
    for release in SCENARIOS:  # no --as-of: now, on both; the same whole days, rows and verdicts
        common = ["gate", "--release", release, "--dry-run", "--json"]
        (duck_code, duck_out, _), (spark_code, spark_out, _) = (
            _cli(*common, "--db", str(duck)), _cli(*common, "--db", str(spark_engine.db_path), *spark))
        d, s = json.loads(duck_out), json.loads(spark_out)
        assert duck_code == spark_code and d["verdict"] == s["verdict"]
        assert (d["window"]["start"], d["window"]["end"]) == (s["window"]["start"], s["window"]["end"])
        assert [(x["rows"], x["decision"], x["failed_gates"]) for x in d["segments"]] == \
            [(x["rows"], x["decision"], x["failed_gates"]) for x in s["segments"]]
    code, _, err = _cli("gate", "--release", "9.99", "--db", str(spark_engine.db_path), *spark)
    assert code == 2 and err.startswith("pipeline gate: error: no release '9.99' in the database; releases present:")


def test_aggregate_and_ingest_again_change_nothing(nightlies, spark_engine, landing):
    spark = ["--engine", "spark", "--spark-master", MASTER, "--warehouse", str(spark_engine.warehouse)]
    code, out, err = _cli("ingest", "--db", str(spark_engine.db_path), "--as-of", "2026-11-27", str(landing), *spark)
    assert code == 4, err  # the landing still holds its 2 rejected files: the data-quality alarm, as the nightly's
    assert out.splitlines()[:2] == ["12 files: 0 loaded, 2 rejected, 10 already ingested",
                                    "0 rows read: 0 accepted, 0 quarantined, 0 duplicates"]
    assert out.splitlines()[-2] == "rollup up to date: no new rows"
    assert out.splitlines()[-1].startswith("DATA QUALITY: 2 of 12 files rejected: ")


def test_spark_gate_subprocess_prints_clean_json_and_exits_with_the_verdict(nightlies, spark_engine):
    """A fresh process starts its own local session: nothing from the JVM reaches stdout or stderr."""
    done = run_cli("gate", "--db", str(spark_engine.db_path), "--engine", "spark", "--spark-master", MASTER,
                   "--warehouse", str(spark_engine.warehouse), "--release", "4.21", "--as-of", "2026-11-27",
                   "--dry-run", "--json", timeout=300)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["verdict"] == "rollback_to_cloud"
    assert done.stderr.startswith("pipeline gate: dry run: nothing stored") and done.stderr.count("\n") == 1


def test_partition_columns_stay_strings(spark_engine, tmp_path):
    """Spark reads a folder release=4.10 as the number 4.1 unless partition type inference is off."""
    folder = tmp_path / "t"
    write_parquet(folder, "4.10", 10, "healthy", seed=1, start=START, days=1)
    df = spark_engine.spark.read.parquet(str(folder))
    assert [r["release"] for r in df.select("release").distinct().collect()] == ["4.10"]
    assert pq.read_table(next(folder.rglob("*.parquet")))["release"][0].as_py() == "4.10"
    assert spark_engine.spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_rewritten_duckdb_functions_give_duckdb_results_on_spark(spark_engine):
    """The dialect's rewrites (pipeline/warehouse/spark/dialect.py) against DuckDB itself, on groups of every size."""
    import random

    import pyarrow as pa

    from pipeline.gate import stats
    from pipeline.warehouse.spark.dialect import transpile

    rng = random.Random(3)
    rows = [(g, round(rng.lognormvariate(5, 1), 1) if rng.random() > 0.05 else None)
            for g in range(40) for _ in range(rng.randint(0, 400))] + [(99, None)]
    table = pa.table({"g": [r[0] for r in rows], "x": [r[1] for r in rows]})
    sql = ("SELECT g, quantile_disc(x, $f) AS d, quantile_cont(x, $f) AS c, list_position($names, 'b') AS p, "
           "list_position($names, 'z') AS missing, list_extract($f, 3) AS third, list_extract($f, 0) AS none "
           "FROM t GROUP BY g")
    params = {"f": [0.95, 0.0, 1.0, *stats.QUANTILE_GRID[::7]], "names": ["a", "b"]}
    with duckdb.connect() as con:
        con.register("t", table)
        expected = {r[0]: r[1:] for r in con.execute(sql, params).fetchall()}
    spark_engine.spark.createDataFrame(table).createOrReplaceTempView("t")
    got = {r[0]: tuple(r[1:]) for r in spark_engine.spark.sql(transpile(sql)[0], args=params).collect()}
    assert got.keys() == expected.keys()
    for g, row in expected.items():
        assert _close(list(got[g]), list(row), rel=1e-15), g


@pytest.mark.slow
def test_spark_connect_gives_the_local_sessions_gate(nightlies, spark_engine, gates, tmp_path):
    """`--spark-remote sc://...`: a Spark Connect server of the pyspark package, started for this test (another
    JVM, so `pytest -m "spark and slow"` runs it, not make test-spark)."""
    import socket
    import subprocess
    import sys
    import time

    import pyspark

    home = Path(pyspark.__file__).parent
    port = free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_PID_DIR": str(tmp_path), "SPARK_LOG_DIR": str(tmp_path),
           "PYSPARK_PYTHON": sys.executable, "SPARK_IDENT_STRING": f"pipeline-test-{port}"}
    subprocess.run(["bash", str(home / "sbin" / "start-connect-server.sh"), "--master", "local[1]",
                    "--conf", f"spark.connect.grpc.binding.port={port}"], env=env, check=True, capture_output=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the Spark Connect server did not start"
            time.sleep(1)
        done = run_cli("gate", "--spark-remote", f"sc://localhost:{port}", "--db", str(spark_engine.db_path),
                       "--warehouse", str(spark_engine.warehouse), "--release", "4.21", "--as-of", "2026-11-27",
                       "--dry-run", "--json", timeout=300)
        assert done.returncode == 1, done.stderr
        remote = json.loads(done.stdout)
        local = gates[("sketch", "4.21")][1].to_dict()
        for d in (remote, local):
            d.pop("evaluated_at")
        assert remote == local
    finally:
        subprocess.run(["bash", str(home / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True)


def test_backtest_reads_the_release_from_spark_and_replays_it_as_on_duckdb(nightlies, spark_engine):
    """`pipeline backtest --engine spark`: the release's window comes from the Spark warehouse, the replay runs
    in DuckDB scratch warehouses. The release as stored has no random draw: the same looks on both engines (the
    A/A and injected variants draw per device in row order, which differs between the two stores)."""
    from pipeline.planning.backtest import backtest

    kwargs = {"nights": 2, "runs": 1, "injections": [], "seed": 0}
    with db.reading(nightlies[0]) as con:
        use_settings(con, CONFIG)
        duck = backtest(con, "4.22", CONFIG, AS_OF, **kwargs).to_dict()
    spark = backtest(spark_engine, "4.22", CONFIG, AS_OF, **kwargs).to_dict()
    assert [v["variant"] for v in spark["variants"]] == [v["variant"] for v in duck["variants"]]
    assert spark["variants"][0] == duck["variants"][0] and duck["variants"][0]["rolled_back"] == 1


def test_drill_and_compare_find_the_same_cells_on_both_engines(nightlies, spark_engine, gates):
    from pipeline.gate.compare import compare
    from pipeline.gate.drill import drill

    by = ("soc", "os_version", "npu_ready")
    failing = [r for r in SCENARIOS if gates[(AS_OF, r)][0].verdict in ("rollback_to_cloud", "partial_rollback")]
    assert failing
    for release in failing:
        duck_result, spark_result = gates[(AS_OF, release)]
        with db.reading(nightlies[0]) as con:
            use_settings(con, CONFIG)
            duck = drill(con, duck_result, CONFIG, by).to_dict()
        spark = drill(spark_engine, spark_result, CONFIG, by).to_dict()
        assert duck["drills"], release
        assert [(d["segment"], d["gate"], d["answer"], [c["cell"] for c in d["cells"]]) for d in spark["drills"]] == \
            [(d["segment"], d["gate"], d["answer"], [c["cell"] for c in d["cells"]]) for d in duck["drills"]]
        assert _close(spark, duck, rel=1e-9), (release, _differences(spark, duck, rel=1e-9)[:10])
    healthy = next(r for r in SCENARIOS if gates[(AS_OF, r)][0].verdict == "keep_edge")
    with db.reading(nightlies[0]) as con:
        use_settings(con, CONFIG)
        duck = compare(con, gates[(AS_OF, failing[0])][0], gates[(AS_OF, healthy)][0], CONFIG).to_dict()
    spark = compare(spark_engine, gates[(AS_OF, failing[0])][1], gates[(AS_OF, healthy)][1], CONFIG).to_dict()
    assert any(c["worse"] for c in duck["comparisons"])
    assert _close(spark, duck, rel=1e-9), _differences(spark, duck, rel=1e-9)[:10]


def test_spark_partitions_age_out_to_the_archive_as_duckdb_days_do(nightlies, spark_engine, tmp_path):
    """Both engines archive the same rows with the same checksums; the Spark partitions leave; Spark reads the
    archive's files without the pipeline; late rows of an archived day are quarantined on Spark too; a full
    roll-up rebuild keeps the archived days' roll-ups."""
    import yaml
    from deltalake import DeltaTable

    duck = tmp_path / "duck.duckdb"
    shutil.copy(nightlies[0], duck)
    spark_db, root = tmp_path / "spark.duckdb", tmp_path / "spark-tables"
    shutil.copy(spark_engine.db_path, spark_db)
    shutil.copytree(spark_engine.warehouse.base, root)
    raw = yaml.safe_load((Path(__file__).parent.parent / "gates" / "admission.yaml").read_text())
    raw["window_days"], raw["gates"]["retention"]["horizon_days"] = 2, 1
    raw["archive"] = {"raw_events_days": 3, "quarantine_days": 3, "device_day_days": 3}  # 11-24 on is kept
    config = tmp_path / "gates.yaml"
    config.write_text(yaml.safe_dump(raw))
    spark = ["--engine", "spark", "--warehouse", str(root)]
    before = sorted(spark_engine.warehouse.partitions("events"))
    daily_before = _rows(spark_db, "SELECT count(*) FROM archived_days")[0][0]

    moved = {}
    for name, db_path, extra in (("duckdb", duck, []), ("spark", spark_db, spark)):
        code, out, err = _cli("archive", "--db", str(db_path), "--config", str(config), "--as-of", "2026-11-27",
                              "--json", *extra)
        assert code == 0, err
        moved[name] = [(m["kind"], m["release"], m["day"], m["rows"], m["checksum"]) for m in json.loads(out)["moved"]]
    assert moved["spark"] == moved["duckdb"]
    due = [(r, d) for r, d in before if d < "2026-11-24"]
    assert [(m[1], m[2]) for m in moved["spark"]] == sorted(due, key=lambda p: (p[1], p[0])) and daily_before == 0
    from pipeline.warehouse.spark.storage import SparkTables

    tables = SparkTables(str(root))
    assert sorted(tables.partitions("events")) == [p for p in before if p[1] >= "2026-11-24"]
    assert all(d >= "2026-11-24" for _, d in tables.partitions("rollup_device_day"))
    again = json.loads(_cli("archive", "--db", str(spark_db), "--config", str(config), "--as-of", "2026-11-27",
                            "--json", *spark)[1])
    assert again["event_days_moved"] == 0

    # Spark reads the archive's Parquet files (the Delta log lists them) without this package (partition
    # columns as strings: type inference is off in its sessions)
    uri = f"{spark_db}.archive/events"
    files = DeltaTable(uri).file_uris()
    frame = spark_engine.spark.read.option("basePath", uri).parquet(*files)
    got = sorted((r["release"], r["day"], r["count"]) for r in frame.groupBy("release", "day").count()
                 .collect())
    assert got == [(m[1], m[2], m[3]) for m in sorted(moved["spark"], key=lambda m: (m[1], m[2]))]

    # a late row of an archived day is quarantined with day_archived; a full rebuild keeps the archived roll-ups
    late = valid_table(5, seed=9, start=datetime(2026, 11, 21))
    late = late.set_column(late.column_names.index("release"), "release", pa.array(["4.20"] * 5))
    write(late, tmp_path / "late" / "late.parquet")
    spark_rows = ["--spark-master", MASTER, *spark]
    code, out, err = _cli("ingest", "--db", str(spark_db), "--config", str(config), "--as-of", "2026-11-27",
                          str(tmp_path / "late"), *spark_rows)
    assert code == 4, err  # every row quarantined: the data-quality alarm
    assert out.splitlines()[1] == "5 rows read: 0 accepted, 5 quarantined, 0 duplicates"
    quarantined = pq.read_table(root / "quarantine", columns=["source_file", "rules"]).to_pylist()
    assert [q["rules"] for q in quarantined if q["source_file"].endswith("late.parquet")] == [["day_archived"]] * 5
    daily = _spark_count(spark_engine, root, "rollup_daily", "2026-11-24")
    code, out, err = _cli("aggregate", "--full", "--db", str(spark_db), "--config", str(config), "--as-of",
                          "2026-11-27", *spark_rows)
    assert code == 0, err
    assert _spark_count(spark_engine, root, "rollup_daily", "2026-11-24") == daily > 0
    code, out, err = _cli("gate", "--db", str(spark_db), "--release", "9.99", "--as-of", "2026-11-27", *spark_rows)
    assert code == 2 and err.startswith("pipeline gate: error: no release '9.99' in the database; releases present: ")


def _spark_count(spark_engine, root: Path, table: str, before: str) -> int:
    """Rows of a Spark table's partitions dated before `before`."""
    from pyspark.sql import functions as F

    frame = spark_engine.spark.read.option("basePath", str(root / table)).parquet(str(root / table))
    return frame.where(F.col("date") < before).count()
