"""The engine boundary without a JVM: what DuckDB commands import, the engine settings of the config, and the
DuckDB implementation of the adapter."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

from conftest import ROOT, run_cli

from pipeline.common.config import load_config
from pipeline.planning.simulate import generate
from pipeline.warehouse import db, sqlfiles
from pipeline.warehouse.engine import DuckDBEngine, Rows, engine_name

PROBE = """
import sys
from pipeline.cli import main as cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as exc:  # --help
    code = exc.code
heavy = sorted(m for m in ("pyspark", "sqlglot", "pipeline.warehouse.spark", "great_expectations") if m in sys.modules)
print("imported:", ",".join(heavy) or "none", "exit:", code)
"""


def _probe(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    return done.stdout.strip().splitlines()[-1]


def test_help_and_the_duckdb_gate_import_neither_pyspark_nor_sqlglot(tmp_path):
    path = tmp_path / "t.duckdb"
    with db.writing(path) as con:
        con.register("t", generate("4.12", 2_000, "healthy", seed=1, start=datetime(2026, 11, 20), days=7))
        con.execute("INSERT INTO events BY NAME SELECT *, 0 AS file_id FROM t")
    assert _probe("gate", "--db", str(path), "--release", "4.12", "--as-of", "2026-11-27", "--dry-run",
                  "--json").startswith("imported: none exit: ")
    assert _probe("--help") == "imported: none exit: 0"
    gate_help = run_cli("gate", "--help")
    assert "--engine {duckdb,spark}" in gate_help.stdout and "--spark-remote sc://HOST:PORT" in gate_help.stdout


def test_engine_settings_are_checked_like_every_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("engine:\n  name: Spark\n")
    done = run_cli("gate", "--check-config", "--config", str(bad))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"pipeline gate: error: {bad}: engine.name must be one of duckdb, spark, got "
                                   "'Spark' (values are case-sensitive: 'spark')")
    bad.write_text("engine:\n  sketch_relative_error: 0.5\n")
    done = run_cli("gate", "--check-config", "--config", str(bad))
    assert done.stderr.strip().endswith("engine.sketch_relative_error must be between 0.0001 and 0.05, got 0.5")
    good = tmp_path / "good.yaml"
    good.write_text("engine:\n  name: spark\n  spark: {master: 'local[2]', warehouse: /data/wh}\n")
    config = load_config(good)
    assert (config.engine.name, config.engine.spark.master, config.engine.spark.warehouse) == \
        ("spark", "local[2]", "/data/wh")


def test_duckdb_engine_runs_a_named_file_as_the_connection_does(tmp_path):
    path = tmp_path / "t.duckdb"
    with db.writing(path) as con:
        con.register("t", generate("4.12", 500, "healthy", seed=2, start=datetime(2026, 11, 20), days=7))
        con.execute("INSERT INTO events BY NAME SELECT *, 0 AS file_id FROM t")
    with db.reading(path) as con:
        direct = sqlfiles.run(con, "gate/releases").fetchall()
        adapted = sqlfiles.run(DuckDBEngine(con), "gate/releases").fetchall()
        assert direct == adapted and direct[0][:2] == ("4.12", 500)
        assert engine_name(con) == engine_name(DuckDBEngine(con)) == "duckdb"
    rows = Rows(["a"], [(1,), (2,)])
    assert (rows.description, rows.fetchone(), rows.fetchall(), rows.fetchone()) == ([("a",)], (1,), [(2,)], None)


def test_spark_files_are_package_data():
    from pipeline.common import package_data

    for name in ("views/settings_bound.sql", "gate/segment_histograms.sql", "rollups/insert_hist_days.sql",
                 "spark/commit_batch.sql"):
        assert (package_data.folder("sql") / name).is_file()
    assert Path(ROOT / "tests" / "golden" / "spark" / "gate" / "segment_counts.sql").is_file()


def test_a_warehouse_spark_cannot_reach_is_one_line_before_any_session(tmp_path):
    done = run_cli("gate", "--engine", "spark", "--db", str(tmp_path / "t.duckdb"), "--warehouse", "nope://bucket/x",
                   "--release", "4.12")
    assert done.returncode == 2
    assert done.stderr.startswith("pipeline gate: error: --warehouse nope://bucket/x: not a location pyarrow can "
                                  "reach (") and done.stderr.count("\n") == 1
