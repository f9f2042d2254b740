from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import NOW, ROOT, counts, run_cli, valid_table, wait_until, with_values, write, writer_holding

from pipeline.ingest.run import ingest
from pipeline.warehouse.schema import load_schema

SCHEMA = load_schema()


def breaking(rule) -> dict:
    """Values for one row that break exactly `rule`."""
    if rule.kind == "not_null":
        return {rule.column: None}
    if rule.kind == "in_set":
        return {rule.column: 5 if rule.column == "mem_class_gb" else "bogus"}
    if rule.kind == "in_range":
        col = SCHEMA.column(rule.column)
        values = {rule.column: (col.max + 1) if col.max is not None else (col.min - 1)}
        if rule.column == "peak_mem_mb":  # a negative peak would also be below resident
            values["resident_mem_mb"] = None
        return values
    if rule.kind == "a_le_b":
        return {rule.arg("a"): 5000.0, rule.arg("b"): 4000.0}
    if rule.kind == "not_after_ingest":
        return {rule.column: NOW + timedelta(hours=rule.arg("max_ahead_hours") + 1)}
    if rule.kind == "forbidden_when":
        return {rule.arg("when_column"): rule.arg("when_value"), rule.column: rule.arg("forbidden_value")}
    raise AssertionError(rule.kind)


def quarantined_rules(db_path: Path) -> dict[int, list[str]]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return dict(con.execute("SELECT row_in_file, rules FROM quarantine ORDER BY row_in_file").fetchall())
    finally:
        con.close()


def test_every_rule_is_quarantined_by_name(tmp_path, db_path):
    table = valid_table(200)
    for i, rule in enumerate(SCHEMA.rules):
        table = with_values(table, i, **breaking(rule))
    two = len(SCHEMA.rules)
    table = with_values(table, two, battery_pct=140.0, temp_end_c=-30.0)
    path = write(table, tmp_path / "land" / "bad.parquet")

    result = ingest(db_path, [path], now=NOW)

    expected = {i: [rule.name] for i, rule in enumerate(SCHEMA.rules)}
    expected[two] = ["temp_end_c_in_range", "battery_pct_in_range"]
    assert quarantined_rules(db_path) == expected
    f = result.files[0]
    assert (f.status, f.rows_read, f.quarantined, f.accepted, f.duplicates) == (
        "loaded", 200, len(SCHEMA.rules) + 1, 200 - len(SCHEMA.rules) - 1, 0)
    con = duckdb.connect(str(db_path), read_only=True)
    # every original value is kept: the null event_id row is there, not dropped
    null_id_row = [r.name for r in SCHEMA.rules].index("event_id_not_null")
    row = con.execute("SELECT event_id, source_file, release, total_ms FROM quarantine WHERE row_in_file = ?",
                      [null_id_row]).fetchone()
    assert row[0] is None and row[1] == str(path) and row[2] == "4.12"
    assert row[3] == table["total_ms"][null_id_row].as_py()
    # Great Expectations' own counts are kept per file and rule
    gx = dict(con.execute("SELECT rule, unexpected_count FROM validations").fetchall())
    con.close()
    assert len(gx) == len(SCHEMA.rules)
    assert gx["battery_pct_in_range"] == 2 and gx["route_in_set"] == 1 and gx["task_not_null"] == 1


def test_reingest_same_file_and_renamed_copy_is_a_noop(tmp_path, db_path):
    path = write(valid_table(300, seed=1), tmp_path / "a.parquet")
    first = ingest(db_path, [path], now=NOW)
    before = counts(db_path)
    copy = tmp_path / "elsewhere" / "renamed.parquet"
    copy.parent.mkdir()
    shutil.copy(path, copy)

    again = ingest(db_path, [path, copy], now=NOW)

    assert first.to_dict()["accepted"] == 300
    assert [f.status for f in again.files] == ["skipped", "skipped"]
    assert again.to_dict()["skipped_files"][1]["reason"].startswith(f"already ingested as {path}")
    assert counts(db_path) == before


def test_duplicate_ids_within_and_across_files_count_once(tmp_path, db_path):
    a = valid_table(300, seed=2)
    b = valid_table(300, seed=3)
    b = pa.concat_tables([b.slice(0, 250), a.slice(0, 40), b.slice(0, 10)])  # 40 from a, 10 repeated in b
    ingest(db_path, [write(a, tmp_path / "a.parquet")], now=NOW)
    result = ingest(db_path, [write(b, tmp_path / "b.parquet")], now=NOW)

    f = result.files[0]
    assert (f.rows_read, f.accepted, f.duplicates, f.quarantined) == (300, 250, 50, 0)
    c = counts(db_path)
    assert c["events"] == c["distinct_ids"] == 550
    assert c["accepted"] + c["quarantined"] + c["duplicates"] == c["rows_read"] == 600


@pytest.mark.parametrize("invalid_first", [True, False])
def test_duplicate_whose_other_copy_is_invalid_same_result_in_both_orders(tmp_path, db_path, invalid_first):
    good = valid_table(50, seed=4)
    bad = with_values(good.slice(0, 1), 0, total_ms=-1.0)  # same event_id, breaks total_ms_in_range
    files = [write(bad, tmp_path / "bad.parquet"), write(good, tmp_path / "good.parquet")]
    if not invalid_first:
        files.reverse()
    for f in files:
        ingest(db_path, [f], now=NOW)
    c = counts(db_path)
    assert (c["events"], c["quarantine"], c["duplicates"]) == (50, 1, 0)


def test_bad_files_are_rejected_whole_with_a_reason(tmp_path, db_path):
    land = tmp_path / "land"
    good = valid_table(100, seed=5)
    write(good, land / "good.parquet")
    (land / "garbage.parquet").write_bytes(b"this is not parquet at all")
    (land / "empty.parquet").write_bytes(b"")
    full = pq.read_table(land / "good.parquet")
    data = (land / "good.parquet").read_bytes()
    (land / "truncated.parquet").write_bytes(data[: len(data) // 2])
    write(full.drop_columns(["total_ms"]), land / "no_total.parquet")
    write(full.set_column(full.column_names.index("prompt_tokens"), "prompt_tokens",
                          pa.array(["many"] * 100)), land / "text_tokens.parquet")
    write(valid_table(100, seed=6).slice(0, 0), land / "zero_rows.parquet")

    result = ingest(db_path, [land], now=NOW).to_dict()

    reasons = {Path(r["path"]).name: r["reason"] for r in result["rejected_files"]}
    assert set(reasons) == {"garbage.parquet", "empty.parquet", "truncated.parquet", "no_total.parquet",
                            "text_tokens.parquet"}
    assert reasons["garbage.parquet"].startswith("not a readable Parquet file: ")
    assert reasons["truncated.parquet"].startswith("not a readable Parquet file: ")
    assert reasons["no_total.parquet"] == "missing required column 'total_ms'"
    assert reasons["text_tokens.parquet"].startswith("column 'prompt_tokens' cannot be cast to int32: is string")
    assert (result["files"], result["accepted"], result["quarantined"]) == (7, 100, 0)
    c = counts(db_path)
    assert c["events"] == 100 and c["files_loaded"] == 2  # good + zero_rows


def test_extra_columns_ms_and_zoned_timestamps_and_missing_optional_columns(tmp_path, db_path):
    base = valid_table(100, seed=7)
    ms = base.set_column(1, "event_time", base["event_time"].cast(pa.timestamp("ms")))
    ms = ms.append_column("debug_blob", pa.array(["x"] * 100)).drop_columns(["soc"])
    zoned = valid_table(100, seed=8)
    zoned = zoned.set_column(1, "event_time", zoned["event_time"].cast(pa.timestamp("us", tz="UTC")))
    ns = valid_table(100, seed=9)
    ns = ns.set_column(1, "event_time", ns["event_time"].cast(pa.timestamp("ns")))
    paths = [write(ms, tmp_path / "ms.parquet"), write(zoned, tmp_path / "zoned.parquet"),
             write(ns, tmp_path / "ns.parquet")]

    result = ingest(db_path, paths, now=NOW)

    assert [f.status for f in result.files] == ["loaded"] * 3
    assert result.files[0].extra_columns == ["debug_blob"] and result.files[0].missing_columns == ["soc"]
    assert "ignored columns not in the contract: debug_blob" in str(result)
    con = duckdb.connect(str(db_path), read_only=True)
    stored = con.execute("SELECT event_id, event_time FROM events WHERE event_id LIKE '0007-%' "
                         "ORDER BY event_id LIMIT 1").fetchone()
    zoned_first = con.execute("SELECT event_time FROM events WHERE event_id = '0008-00000000'").fetchone()[0]
    con.close()
    first = base["event_time"][0].as_py()
    assert stored[1] == first.replace(microsecond=first.microsecond // 1000 * 1000)  # ms precision kept
    assert zoned_first == valid_table(100, seed=8)["event_time"][0].as_py()


def test_json_output_and_exit_code_from_the_real_command(tmp_path, db_path):
    """A rejected file is a data-quality alarm for `ingest` as for `nightly` (exit 4), so a CI script notices;
    a landing that does not exist is a usage error that creates no warehouse."""
    write(valid_table(120, seed=10), tmp_path / "land" / "a.parquet")
    (tmp_path / "land" / "b.parquet").write_bytes(b"nope")
    proc = run_cli("ingest", "--db", str(db_path), "--json", str(tmp_path / "land"))
    assert proc.returncode == 4, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["files"], out["accepted"], out["quarantined"], out["duplicates"]) == (2, 120, 0, 0)
    assert [Path(r["path"]).name for r in out["rejected_files"]] == ["b.parquet"]
    assert out["skipped_files"] == []
    assert len(out["data_quality"]) == 1
    assert out["data_quality"][0].startswith(f"1 of 2 files rejected: {tmp_path / 'land' / 'b.parquet'}: not a ")

    write(valid_table(50, seed=11), tmp_path / "clean" / "c.parquet")
    clean = run_cli("ingest", "--db", str(db_path), str(tmp_path / "clean"))
    assert clean.returncode == 0 and "DATA QUALITY" not in clean.stdout, clean.stdout + clean.stderr

    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "d.parquet").write_bytes(b"PAR1 not really")
    fresh = tmp_path / "fresh.duckdb"
    rejected = run_cli("ingest", "--db", str(fresh), str(tmp_path / "corrupt"))
    assert rejected.returncode == 4, rejected.stdout + rejected.stderr
    assert rejected.stdout.splitlines()[-1].startswith(
        f"DATA QUALITY: 1 of 1 file rejected: {tmp_path / 'corrupt' / 'd.parquet'}: "), rejected.stdout

    nowhere = tmp_path / "new.duckdb"
    missing = run_cli("ingest", "--db", str(nowhere), str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"pipeline ingest: error: no such file or folder: {tmp_path / 'nowhere'}"
    assert list(tmp_path.glob("new.duckdb*")) == []  # no warehouse, no WAL, no writer's lock file


def test_second_writer_gets_a_plain_message_and_exit_2(tmp_path, db_path):
    with writer_holding(db_path) as holder:
        write(valid_table(10), tmp_path / "a.parquet")
        proc = run_cli("ingest", "--db", str(db_path), str(tmp_path / "a.parquet"))
        assert proc.returncode == 2
        assert proc.stderr.startswith(f"pipeline ingest: error: database {db_path} is held by another writer "
                                      f"(pid {holder.pid}, `pipeline nightly` since ")
    # the kernel dropped the dead holder's lock: the next writer takes over
    proc = run_cli("ingest", "--db", str(db_path), str(tmp_path / "a.parquet"))
    assert proc.returncode == 0, proc.stderr
    assert counts(db_path)["events"] == 10


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_kill_mid_ingest_leaves_whole_files_and_a_rerun_finishes(tmp_path, db_path):
    land = tmp_path / "land"
    total = 40
    for i in range(total):
        write(valid_table(1000, seed=100 + i), land / f"part-{i:02d}.parquet")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "ingest", "--validate-batch-rows", "1",
                             "--db", str(db_path), str(land)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Kill once a few files are in. The reader's connection is held through the kill: the writer,
    # which opens the file once per batch, is then blocked at its next batch and cannot finish first.
    def three_files_in() -> duckdb.DuckDBPyConnection | None:
        """An open read connection once the manifest has 3 files (kept open), else None."""
        assert proc.poll() is None, f"pipeline ingest ended (exit {proc.returncode}) before 3 files were in"
        try:
            con = duckdb.connect(str(db_path), read_only=True)
        except duckdb.Error:  # not created yet, or the writer holds it just now
            return None
        try:
            n = con.execute("SELECT count(*) FROM files").fetchone()[0]
        except duckdb.Error:
            n = 0
        if n >= 3:
            return con
        con.close()
        return None

    try:
        held = wait_until(three_files_in, 120, f"pipeline ingest stored 3 of its {total} files", every=0.02)
        workers = children(proc.pid)  # Great Expectations runs in the ingest process: none are expected
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    held.close()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()], "orphaned child process"

    c = counts(db_path)
    assert proc.returncode == -signal.SIGKILL
    assert 3 <= c["files_loaded"] < total
    assert c["events"] == c["accepted"] == 1000 * c["files_loaded"]

    result = ingest(db_path, [land], now=NOW)
    c = counts(db_path)
    assert (c["files_loaded"], c["events"], c["distinct_ids"]) == (total, 40_000, 40_000)
    assert sum(f.status == "skipped" for f in result.files) == total - sum(f.status == "loaded" for f in result.files)


def test_a_batch_size_below_one_is_a_usage_error():
    proc = run_cli("ingest", "--validate-batch-rows", "0", "sample_logs")
    assert proc.returncode == 2
    assert proc.stderr == "pipeline: error: --validate-batch-rows must be >= 1 (see pipeline --help)\n"
