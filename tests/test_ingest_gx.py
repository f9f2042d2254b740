"""Great Expectations validating inside DuckDB (the self-test, the suite generated from schemas/),
and ingest's remembered rejections, page checksums, the raising rule named, order-independent dedupe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import NOW, ROOT, query, run_cli, valid_table, with_values, write

from pipeline.warehouse.schema import load_schema

SCHEMA = load_schema()
AS_OF = NOW.isoformat()


def contract_tree(tmp: Path) -> Path:
    """A copy of the code and its data files, to change schemas/ in without touching the repo.
    The data folders go both beside the package (source layout) and inside it (wheel layout)."""
    root = tmp / "tree"
    shutil.copytree(ROOT / "pipeline", root / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("sql", "schemas", "gates"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(ROOT / name, root / "pipeline" / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def edit_schema(root: Path, change) -> None:
    for path in (root / "schemas" / "telemetry_event.yaml", root / "pipeline" / "schemas" / "telemetry_event.yaml"):
        raw = yaml.safe_load(path.read_text())
        change(raw)
        path.write_text(yaml.safe_dump(raw, sort_keys=False))


def run_tree(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=root)



# --- the self-test of the GX-on-DuckDB path -------------------------------------------------------

def test_self_test_passes_with_fresh_cursors_and_catches_a_connection_whose_results_vanish(tmp_path):
    import duckdb_engine

    from pipeline.ingest.validate import SelfTestFailed, Validator

    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    con.execute("ATTACH ':memory:' AS stage")
    Validator(SCHEMA).bind(con)  # the shipped wrapper: no error
    # duckdb_engine's own wrapper: its cursor is the connection, whose result the close wipes
    broken = Validator(SCHEMA, connection_wrapper=lambda current: duckdb_engine.ConnectionWrapper(current()))
    with pytest.raises(SelfTestFailed) as caught:
        broken.bind(con)
    message = str(caught.value)
    assert message.startswith("the Great Expectations self-test on DuckDB failed (rule v_not_null: ")
    assert message.endswith("use the versions pinned in pyproject.toml")
    assert "\n" not in message
    con.close()


# --- GX decides: the suite is generated from schemas/ ----------------------------------------------

def test_a_rule_removed_from_schemas_lets_its_rows_through_and_a_rule_added_quarantines(tmp_path):
    table = valid_table(100, seed=21)
    table = with_values(table, 7, battery_pct=140.0)  # breaks battery_pct_in_range only
    table = with_values(table, 3, route="cloud", model_id="m-1b-int4", auto_fallback=False)  # valid today
    path = write(table, tmp_path / "land" / "a.parquet")

    shipped = run_cli("ingest", "--db", str(tmp_path / "shipped.duckdb"), "--json", "--as-of", AS_OF, str(path))
    assert shipped.returncode == 0, shipped.stderr
    assert (json.loads(shipped.stdout)["accepted"], json.loads(shipped.stdout)["quarantined"]) == (99, 1)
    assert query(tmp_path / "shipped.duckdb", "SELECT row_in_file, rules FROM quarantine") == [
        (7, ["battery_pct_in_range"])]

    root = contract_tree(tmp_path)

    def change(raw: dict) -> None:
        battery = next(c for c in raw["columns"] if c["name"] == "battery_pct")
        del battery["min"], battery["max"]
        raw["rules"].append({"name": "cloud_has_no_model", "kind": "forbidden_when", "when_column": "route",
                             "when_value": "cloud", "column": "model_id", "forbidden_value": "m-1b-int4"})

    edit_schema(root, change)
    edited = run_tree(root, "ingest", "--db", str(tmp_path / "edited.duckdb"), "--json", "--as-of", AS_OF, str(path))
    assert edited.returncode == 0, edited.stderr
    out = json.loads(edited.stdout)
    assert (out["accepted"], out["quarantined"]) == (99, 1)
    assert query(tmp_path / "edited.duckdb", "SELECT row_in_file, rules FROM quarantine") == [
        (3, ["cloud_has_no_model"])]
    rules = dict(query(tmp_path / "edited.duckdb", "SELECT rule, unexpected_count FROM validations"))
    assert "battery_pct_in_range" not in rules and rules["cloud_has_no_model"] == 1


# --- 13.3: a rejected file is remembered by its sha256 --------------------------------------------

def test_a_rejected_file_is_remembered_by_hash_with_its_footer_row_count(tmp_path, db_path):
    land = tmp_path / "land"
    write(valid_table(500, seed=22).drop_columns(["total_ms"]), land / "no_total.parquet")
    (land / "garbage.parquet").write_bytes(b"this is not parquet at all")
    args = ("ingest", "--db", str(db_path), "--as-of", AS_OF, str(land))

    first = run_cli(*args)
    second = run_cli(*args)

    assert (first.returncode, second.returncode) == (4, 4), first.stderr + second.stderr  # still rejected: alarm
    garbage, no_total = land / "garbage.parquet", land / "no_total.parquet"
    garbage_reason = [line for line in first.stdout.splitlines() if line.startswith(f"  rejected {garbage}: ")][0]
    assert garbage_reason.startswith(f"  rejected {garbage}: not a readable Parquet file: ")
    assert f"  rejected {no_total}: missing required column 'total_ms'" in first.stdout.splitlines()
    assert second.stdout.splitlines()[:4] == [
        "2 files: 0 loaded, 2 rejected, 0 already ingested",
        "0 rows read: 0 accepted, 0 quarantined, 0 duplicates",
        f"{garbage_reason} (already rejected as {garbage} at 2026-12-02 12:00 UTC)",
        f"  rejected {no_total}: missing required column 'total_ms' (already rejected as {no_total} at "
        "2026-12-02 12:00 UTC)",
    ]
    rows = query(db_path, "SELECT path, status, rows_read, accepted, quarantined, duplicates FROM files ORDER BY path")
    assert rows == [(str(garbage), "rejected", 0, 0, 0, 0), (str(no_total), "rejected", 500, 0, 0, 0)]


# --- 13.4: page checksums ---------------------------------------------------------------------------

def test_a_flipped_byte_in_a_checksummed_page_rejects_the_file(tmp_path, db_path):
    table = valid_table(200, seed=23)
    path = tmp_path / "land" / "crc.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(table, path, write_page_checksum=True, compression="none", use_dictionary=False)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(table.column_names.index("total_ms"))
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset + chunk.total_compressed_size - 3] ^= 0x10  # inside the last double
    path.write_bytes(bytes(data))
    # without verification the flip goes unnoticed and reads as another number
    unchecked = pq.read_table(path)["total_ms"].to_pylist()
    assert unchecked[-1] != table["total_ms"][-1].as_py() and unchecked[:-1] == table["total_ms"].to_pylist()[:-1]

    proc = run_cli("ingest", "--db", str(db_path), "--as-of", AS_OF, str(path))

    assert proc.returncode == 4, proc.stderr  # the data-quality alarm for the rows quarantined
    assert proc.stdout.splitlines()[:3] == [
        "1 file: 0 loaded, 1 rejected, 0 already ingested",
        "0 rows read: 0 accepted, 0 quarantined, 0 duplicates",
        f"  rejected {path}: not a readable Parquet file: could not verify page integrity, "
        "CRC checksum verification failed for page_ordinal 0",
    ]
    assert query(db_path, "SELECT count(*) FROM events") == [(0,)]
    assert query(db_path, "SELECT status, rows_read FROM files") == [("rejected", 200)]


# --- 13.5: the expectation whose metric raised is the one named -------------------------------------

def test_a_raising_expectation_is_named_with_its_own_message_and_gx_logs_stay_off_stderr(tmp_path, db_path):
    root = contract_tree(tmp_path)

    def change(raw: dict) -> None:  # a typo in schemas/: a string among mem_class_gb's int32 values
        mem = next(c for c in raw["columns"] if c["name"] == "mem_class_gb")
        mem["enum"] = [*mem["enum"], "eight"]

    edit_schema(root, change)
    path = write(valid_table(50, seed=24), tmp_path / "land" / "a.parquet")

    proc = run_tree(root, "ingest", "--db", str(db_path), "--as-of", AS_OF, str(path))

    assert proc.returncode == 4  # the data-quality alarm for the rows quarantined
    assert proc.stderr == f"pipeline ingest: created a new warehouse at {db_path}\n"  # nothing from GX
    assert proc.stdout.splitlines()[:3] == [
        "1 file: 0 loaded, 1 rejected, 0 already ingested",
        "0 rows read: 0 accepted, 0 quarantined, 0 duplicates",
        f"  rejected {path}: validator error: rule mem_class_gb_in_set: Great Expectations could not evaluate it: "
        "(_duckdb.ConversionException) Conversion Error: Could not convert string 'eight' to INT32",
    ]
    assert query(db_path, "SELECT count(*) FROM events") == [(0,)]
    assert query(db_path, "SELECT status, rows_read FROM files") == [("rejected", 50)]


# --- 13.11: which copy of an event_id wins does not depend on arrival order -------------------------

def _copies(tmp_path: Path) -> tuple[Path, Path]:
    """Two files sharing two event_ids with different content: X (B's copy is earlier) and
    Y (same event_time, different total_ms: the smaller content hash wins)."""
    a = valid_table(10, seed=25)
    b = valid_table(10, seed=26)
    x_time, y_time = a["event_time"][0].as_py(), a["event_time"][1].as_py()
    b = with_values(b, 0, event_id=a["event_id"][0].as_py(), event_time=x_time - timedelta(minutes=5))
    b = with_values(b, 1, event_id=a["event_id"][1].as_py(), event_time=y_time,
                    total_ms=a["total_ms"][1].as_py() + 1.0)
    return write(a, tmp_path / "land" / "a.parquet"), write(b, tmp_path / "land" / "b.parquet")


def _stored(db_path: Path) -> tuple[list, list, list]:
    events = query(db_path, "SELECT * EXCLUDE (file_id), (SELECT path FROM files f WHERE f.file_id = e.file_id) "
                            "FROM events e ORDER BY event_id")
    files = query(db_path, "SELECT path, rows_read, accepted, quarantined, duplicates FROM files ORDER BY path")
    rollup = query(db_path, "SELECT * EXCLUDE (updated_at) FROM rollup_daily ORDER BY ALL")
    # the same rows summed in another physical order differ in the last bits of a stddev
    rollup = [tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in rollup]
    return events, files, rollup


def _content_hash(path: Path, event_id: str) -> str:
    """docs/ingestion.md's definition, computed apart from the pipeline: md5 of DuckDB's to_json of the contract
    columns."""
    con = duckdb.connect()
    try:
        return con.execute(f"SELECT md5(CAST(to_json(t) AS VARCHAR)) FROM (SELECT {', '.join(SCHEMA.names)} "
                           "FROM read_parquet($p) WHERE event_id = $id) t",
                           {"p": str(path), "id": event_id}).fetchone()[0]
    finally:
        con.close()


# one run: both files in one batch, or each in its own (the later batch finds the copy through stage.run_keys)
@pytest.mark.parametrize(("one_run", "batch_rows"), [(False, "1000000"), (True, "1000000"), (True, "1")],
                         ids=["separate_runs", "one_run", "one_run_batch_per_file"])
def test_the_winning_copy_does_not_depend_on_arrival_order(tmp_path, one_run, batch_rows):
    a, b = _copies(tmp_path)
    x_id, y_id = pq.read_table(a)["event_id"][:2].to_pylist()
    y_winner = a if _content_hash(a, y_id) < _content_hash(b, y_id) else b
    # X is won by b (earlier); Y by y_winner; each lost copy is its file's duplicate
    expected_counts = {a: (10, 9 if y_winner == a else 8, 0, 1 if y_winner == a else 2),
                       b: (10, 9 if y_winner == a else 10, 0, 1 if y_winner == a else 0)}
    stored = []
    for order in ([a, b], [b, a]):
        db_path = tmp_path / f"{order[0].stem}-first.duckdb"
        runs = [order] if one_run else [[order[0]], [order[1]]]
        for paths in runs:
            proc = run_cli("ingest", "--db", str(db_path), "--json", "--as-of", AS_OF,
                           "--validate-batch-rows", batch_rows, *map(str, paths))
            assert proc.returncode == 0, proc.stderr
        if one_run:  # the run's own summary agrees with the manifest
            per_file = {f["path"]: (f["rows_read"], f["accepted"], f["quarantined"], f["duplicates"])
                        for f in json.loads(proc.stdout)["per_file"]}
            assert per_file == {str(p): c for p, c in expected_counts.items()}
        stored.append(_stored(db_path))

    assert stored[0] == stored[1]
    events, files, rollup = stored[0]
    assert len(events) == 18 and rollup
    by_id = {row[0]: row for row in events}
    assert by_id[x_id][-1] == str(b)  # the earliest event_time
    assert by_id[y_id][-1] == str(y_winner)  # the same event_time: the smaller content hash
    assert files == [(str(p), *c) for p, c in expected_counts.items()]
    rolled = query(tmp_path / "a-first.duckdb", "SELECT sum(rows) FROM rollup_daily")
    assert rolled == [(18,)]  # the replaced row left its day's rollup


def test_an_exception_gx_swallows_in_metric_resolution_is_named_and_debug_shows_it(tmp_path, monkeypatch):
    """GX's metric graph catches an exception that is not one of its metric errors, logs a line and reports
    every rule as "Metric ... is not available". The ingest stops (exit 2), naming the real exception; with
    --debug the traceback ends in it."""
    from great_expectations.execution_engine import SqlAlchemyExecutionEngine

    from pipeline.ingest import run

    def boom(self, *a, **k):
        raise ValueError("injected: a plain bug in metric resolution")

    monkeypatch.setattr(SqlAlchemyExecutionEngine, "resolve_metrics", boom)
    monkeypatch.setattr(run, "_validators", {})  # a new Validator, so its self-test runs on the broken GX
    path = write(valid_table(20, seed=4), tmp_path / "land" / "a.parquet")
    args = ("ingest", "--db", str(tmp_path / "t.duckdb"), "--as-of", AS_OF, str(path))
    done = run_cli(*args)
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.strip().splitlines() if not ln.startswith("pipeline ingest: created a new ")]
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("pipeline ingest: error: the Great Expectations self-test on DuckDB failed (rule "
                               "v_not_null: Great Expectations could not evaluate it: its metric resolution raised "
                               "ValueError: injected: a plain bug in metric resolution); "), lines[0]
    run._validators.clear()
    debug = run_cli(*args, "--debug")
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr
    assert "ValueError: injected: a plain bug in metric resolution" in debug.stderr
    assert "in boom" in debug.stderr  # the frame that raised
