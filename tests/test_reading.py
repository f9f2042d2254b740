"""Reading landed files: every page decoded, checksums checked (reading.check), and the read rules
as DuckDB stages a file (reading.py, sql/ingest/cast_macros.sql)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import NOW, query, valid_table, write

from pipeline.ingest import reading
from pipeline.ingest.run import ingest
from pipeline.warehouse.schema import load_schema


def flipped(path: Path, column: str, out: Path) -> Path:
    """A copy of `path` with one bit flipped near the end of `column`'s first chunk."""
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(0).column(meta.schema.names.index(column))
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset + chunk.total_compressed_size - 3] ^= 0x10
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("compression", ["none", "snappy", "zstd", "gzip"])
@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
def test_a_page_that_fails_its_checksum_rejects_the_file(tmp_path, compression, page_version):
    table = valid_table(3000, seed=60)
    good = tmp_path / "good.parquet"
    pq.write_table(table, good, compression=compression, write_page_checksum=True, data_page_size=2048,
                   data_page_version=page_version)
    plain = tmp_path / "plain.parquet"
    pq.write_table(table, plain, compression=compression, data_page_version=page_version)
    bad = flipped(good, "total_ms", tmp_path / "bad.parquet")

    schema = load_schema()
    assert reading.check(good, schema).reason is None
    assert reading.check(plain, schema).reason is None  # no CRC to check
    reason = reading.check(bad, schema).reason
    assert reason is not None and reason.startswith("not a readable Parquet file: ")


def test_a_flipped_bit_in_a_gzip_page_is_caught_without_checksums(tmp_path, db_path):
    # DuckDB's reader loads most such flips; pyarrow's zlib refuses them, so gzip files are decoded by both
    path = tmp_path / "land" / "a.parquet"
    path.parent.mkdir()
    pq.write_table(valid_table(3000, seed=62), tmp_path / "a.parquet", compression="gzip")
    flipped(tmp_path / "a.parquet", "total_ms", path)

    result = ingest(db_path, [path], now=NOW)

    assert result.files[0].status == "rejected"
    assert result.files[0].reason.startswith("not a readable Parquet file: ")
    assert query(db_path, "SELECT count(*) FROM events") == [(0,)]


def with_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, values)


def test_values_that_cannot_be_cast_reject_the_file_naming_the_column(tmp_path, db_path):
    land = tmp_path / "land"
    base = valid_table(20, seed=63)
    wide = pa.array([10] * 19 + [3_000_000_000], pa.int64())
    write(with_column(base, "prompt_tokens", wide), land / "too_big.parquet")
    write(with_column(base, "output_tokens", pa.array([1.0] * 19 + [2.5])), land / "fraction.parquet")
    write(with_column(base, "total_ms", pa.array([100] * 19 + [2**60], pa.int64())), land / "inexact.parquet")
    write(with_column(base, "output_tokens", pa.array([7.0] * 20)), land / "whole_floats.parquet")

    result = ingest(db_path, [land], now=NOW)

    reasons = {Path(f.path).name: (f.status, f.reason) for f in result.files}
    assert reasons["too_big.parquet"] == (
        "rejected", "column 'prompt_tokens' cannot be cast to int32: 3000000000 is outside -2147483648 to 2147483647")
    assert reasons["fraction.parquet"] == (
        "rejected", "column 'output_tokens' cannot be cast to int32: 2.5 is not a whole number from -2147483648 "
                    "to 2147483647")
    assert reasons["inexact.parquet"][0] == "rejected"
    assert reasons["inexact.parquet"][1].startswith(f"column 'total_ms' cannot be cast to float64: {2**60} ")
    assert reasons["whole_floats.parquet"] == ("loaded", None)
    assert query(db_path, "SELECT DISTINCT output_tokens FROM events") == [(7,)]


def test_nan_zones_nanoseconds_and_dictionaries_follow_the_read_rules(tmp_path, db_path):
    base = valid_table(3, seed=64)
    table = with_column(base, "battery_pct", pa.array([float("nan"), 50.0, None]))
    table = with_column(table, "event_time", pa.array([1796040000123456789, 1796040000000000999, 1796040001000000000],
                                                      pa.timestamp("ns", tz="Europe/Berlin")))
    table = with_column(table, "device_tier", pa.array(["low", "mid", "low"]).dictionary_encode())
    path = tmp_path / "a.parquet"
    pq.write_table(table, path)

    result = ingest(db_path, [path], now=NOW)

    assert result.files[0].status == "loaded", result.files[0].reason
    rows = query(db_path, "SELECT battery_pct, event_time, device_tier FROM events ORDER BY event_time")
    assert rows == [  # NaN is null; the instant's UTC wall time, ns truncated to µs; dictionary values decoded
        (50.0, datetime(2026, 11, 30, 12, 0, 0), "mid"),
        (None, datetime(2026, 11, 30, 12, 0, 0, 123456), "low"),
        (None, datetime(2026, 11, 30, 12, 0, 1), "low"),
    ]


def test_a_file_named_with_glob_characters_is_read_alone(tmp_path, db_path):
    land = tmp_path / "land"
    odd = write(valid_table(10, seed=65), land / "part[1]*.parquet")
    write(valid_table(20, seed=66), land / "part1x.parquet")  # what the name would match as a glob

    result = ingest(db_path, [odd], now=NOW)

    assert (result.files[0].status, result.files[0].accepted) == ("loaded", 10)
    assert query(db_path, "SELECT count(*), min(event_id) FROM events") == [(10, "0065-00000000")]


def test_a_release_folder_does_not_replace_the_files_own_release(tmp_path, db_path):
    # DuckDB reads key=value folders as columns by default, over the file's own column of that name
    path = write(valid_table(10, seed=67), tmp_path / "land" / "release=9.99" / "a.parquet")

    ingest(db_path, [path], now=NOW)

    assert query(db_path, "SELECT DISTINCT release FROM events") == [("4.12",)]


def test_a_column_named_like_a_contract_column_in_another_case_is_an_extra_column(tmp_path, db_path):
    # DuckDB matches names regardless of case: `Total_MS` first in the file would be read as total_ms
    table = valid_table(10, seed=68)
    table = pa.table({"Total_MS": pa.array([-5.0] * 10), **{n: table[n] for n in table.column_names}})
    path = write(table, tmp_path / "land" / "a.parquet")

    result = ingest(db_path, [path], now=NOW)

    assert (result.files[0].status, result.files[0].accepted, result.files[0].extra_columns) == (
        "loaded", 10, ["Total_MS"])
    assert query(db_path, "SELECT min(total_ms) > 0 FROM events") == [(True,)]


ENCRYPTED_FILES = ("encrypt_columns_plaintext_footer.parquet.encrypted",  # aborted the process before
                   "encrypt_columns_and_footer.parquet.encrypted")  # PARE magic


def test_encrypted_files_are_rejected_up_front_and_the_good_file_beside_them_loads(tmp_path):
    """apache/parquet-testing's encrypted files, each beside a good contract file, through the real CLI: the
    process is never killed (the plaintext-footer one used to abort it with SIGABRT), each encrypted file is
    rejected as such, the good file's rows are in, and a second run re-reads neither."""
    import shutil

    from conftest import ROOT, counts, run_cli

    land = tmp_path / "land"
    land.mkdir()
    vendored = ROOT / "tests" / "data" / "parquet-testing"
    for name in ENCRYPTED_FILES:
        shutil.copy(vendored / name, land / name.removesuffix(".encrypted"))
    write(valid_table(300, seed=61), land / "good.parquet")
    db_path = tmp_path / "t.duckdb"
    done = run_cli("ingest", "--db", str(db_path), "--json", "--as-of", NOW.isoformat(), str(land))
    assert done.returncode == 4, done.stderr  # the data-quality alarm for the rejected file; not -6 (SIGABRT)
    import json

    result = json.loads(done.stdout)
    rejected = {Path(f["path"]).name: f["reason"] for f in result["rejected_files"]}
    assert rejected == {n.removesuffix(".encrypted"): "encrypted Parquet (not supported)" for n in ENCRYPTED_FILES}
    assert (result["accepted"] + result["quarantined"], counts(db_path)["events"]) == (300, result["accepted"])
    again = json.loads(run_cli("ingest", "--db", str(db_path), "--json", str(land)).stdout)
    assert again["rows_read"] == 0  # not read again: their bytes are known
    assert all(f["reason"].startswith("encrypted Parquet (not supported) (already rejected as ")
               for f in again["rejected_files"]) and len(again["rejected_files"]) == 2

    # the nightly job on the same landing, into a fresh warehouse: exit 4 (a data-quality problem naming the
    # rejected files), never a signal; a second night counts the same and reads nothing again
    nightly_db = tmp_path / "n.duckdb"
    for night in (1, 2):
        done = run_cli("nightly", "--db", str(nightly_db), "--landing", str(land), "--json", "--as-of", NOW.isoformat())
        assert done.returncode == 4, done.stderr
        run = json.loads(done.stdout)
        assert run["data_quality"][0].startswith("2 of 3 files rejected: ")
        assert run["steps"]["ingest"]["rows_read"] == (300 if night == 1 else 0)
        assert counts(nightly_db)["events"] == result["accepted"]
