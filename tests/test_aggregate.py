"""The rollup and the ad hoc SQL, checked against figures computed independently with polars."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import counts, run_cli, valid_table, with_values
from polars.testing import assert_frame_equal

from pipeline.common.config import load_config
from pipeline.planning.simulate import generate
from pipeline.warehouse import aggregate, db
from pipeline.warehouse.aggregate import day_chunks, refresh

CONFIG = load_config()
START = datetime(2026, 11, 20)


def add_file(db_path, table: pa.Table, name: str) -> None:
    """Rows as one loaded file (bypassing validation: the rollup is under test)."""
    with db.writing(db_path) as con:
        file_id = con.execute("SELECT nextval('file_id_seq')").fetchone()[0]
        con.execute("INSERT INTO files VALUES (?, ?, 0, ?, ?, ?, 0, 0, 'loaded', NULL, [], [], now()::TIMESTAMP)",
                    [file_id, name, name, table.num_rows, table.num_rows])
        con.register("t", table)
        con.execute("INSERT INTO events BY NAME SELECT *, ? AS file_id FROM t", [file_id])


def rollup(db_path) -> pl.DataFrame:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return pl.from_arrow(con.sql("SELECT * EXCLUDE (updated_at) FROM rollup_daily").to_arrow_table())
    finally:
        con.close()


def expected(table: pa.Table) -> pl.DataFrame:
    """The contract's derived fields and the rollup's figures, written independently."""
    df = pl.from_arrow(table).with_columns(
        day=pl.col("event_time").dt.date(),
        network_bucket=pl.when(pl.col("network_type") == "offline").then(pl.lit("offline"))
        .when(pl.col("network_type").is_in(["2g", "3g"]) | (pl.col("rtt_ms") >= 300)).then(pl.lit("weak"))
        .otherwise(pl.lit("normal")),
        user_fallback=pl.col("outcome").is_in(["edited", "regenerated", "undone"]),
    ).with_columns(
        fallback=pl.col("user_fallback") | pl.col("auto_fallback"),
        failure=pl.col("user_fallback") | pl.col("auto_fallback") | (pl.col("outcome") == "failed")
        | pl.col("error_code").is_not_null(),
        detected=pl.col("auto_fallback") | pl.col("error_code").is_not_null(),
    )
    keys = ["release", "day", "task", "route", "device_tier", "network_bucket"]
    return df.group_by(keys).agg(
        rows=pl.len(),
        total_ms_p95=pl.col("total_ms").quantile(0.95, interpolation="linear"),
        adoption_rate=(pl.col("outcome") == "adopted").mean(),
        fallback_rate=pl.col("fallback").mean(),
        failures=pl.col("failure").sum(),
        failure_detectability=((pl.col("failure") & pl.col("detected")).sum() / pl.col("failure").sum())
        .fill_nan(None),  # no failures: undefined, NULL in DuckDB
        over_10s_share=(pl.col("total_ms") > 10_000).mean(),
    )


def test_rollup_matches_an_independent_computation(db_path):
    table = generate("4.12", 30_000, "postmortem", seed=5, start=START, days=3)
    add_file(db_path, table, "a")
    result = refresh(db_path, CONFIG)
    assert result.full and [d for _, d in result.days] == [START.date() + timedelta(days=i) for i in range(3)]
    keys = ["release", "day", "task", "route", "device_tier", "network_bucket"]
    got = rollup(db_path).sort(keys)
    want = expected(table).sort(keys)
    assert got.height == want.height == result.groups
    assert got["rows"].to_list() == want["rows"].to_list()
    assert got["failures"].to_list() == want["failures"].to_list()
    for col in ("total_ms_p95", "adoption_rate", "fallback_rate", "failure_detectability", "over_10s_share"):
        g, w = got[col].to_list(), want[col].to_list()
        assert [x is None for x in g] == [x is None for x in w], col
        assert [x for x in g if x is not None] == pytest.approx([x for x in w if x is not None], rel=1e-9), col


def test_network_bucket_edges(db_path):
    table = valid_table(8, seed=11)
    cases = [("wifi", 300.0, "weak"), ("wifi", 299.9, "normal"), ("offline", None, "offline"), ("2g", 20.0, "weak"),
             ("3g", 10.0, "weak"), ("4g", None, "normal"), ("unknown", 1000.0, "weak"), ("5g", 0.0, "normal")]
    for i, (net, rtt, _) in enumerate(cases):
        table = with_values(table, i, network_type=net, rtt_ms=rtt)
    add_file(db_path, table, "edges")
    con = duckdb.connect(str(db_path), read_only=True)
    got = dict(con.execute("SELECT event_id, network_bucket FROM events_enriched").fetchall())
    con.close()
    assert [got[table["event_id"][i].as_py()] for i in range(8)] == [c[2] for c in cases]


def test_incremental_refresh_recomputes_only_the_new_day_and_equals_a_rebuild(db_path, tmp_path):
    first = generate("4.12", 20_000, "healthy", seed=6, start=START, days=3)
    new_day = generate("4.12", 5_000, "healthy", seed=7, start=START + timedelta(days=3), days=1)
    add_file(db_path, first, "first")
    refresh(db_path, CONFIG)
    add_file(db_path, new_day, "second")

    result = refresh(db_path, CONFIG)

    assert not result.full and result.days == [("4.12", (START + timedelta(days=3)).date())]
    con = duckdb.connect(str(db_path), read_only=True)
    stamps = con.execute("SELECT day, count(DISTINCT updated_at) FROM rollup_daily GROUP BY day").fetchall()
    con.close()
    assert len(stamps) == 4
    keys = ["release", "day", "task", "route", "device_tier", "network_bucket"]
    incremental = rollup(db_path).sort(keys)
    refresh(db_path, CONFIG, full=True)
    assert incremental.equals(rollup(db_path).sort(keys))
    assert refresh(db_path, CONFIG).days == []


def table_frame(db_path, table: str, keys: list[str]) -> pl.DataFrame:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return pl.from_arrow(con.sql(f"SELECT * EXCLUDE (updated_at) FROM {table}" if table == "rollup_daily"
                                     else f"SELECT * FROM {table}").to_arrow_table()).sort(keys)
    finally:
        con.close()


GATE_KEYS = {"rollup_hist": ["release", "day", "task", "route", "device_tier", "network_bucket", "figure", "bin"],
             "rollup_device_day": ["release", "day", "device_id", "task", "route", "device_tier", "network_bucket"]}


def test_an_intra_day_batch_is_added_to_the_gate_rollups_as_a_recomputation_would_and_the_day_waits(db_path):
    day = START + timedelta(days=2)
    morning = generate("4.12", 9_000, "healthy", seed=9, start=START, days=3)
    morning = morning.filter(pc.less(morning["event_time"], pa.scalar(day + timedelta(hours=12))))
    afternoon = generate("4.12", 6_000, "postmortem", seed=10, start=day + timedelta(hours=12), days=1)
    afternoon = afternoon.filter(pc.less(afternoon["event_time"], pa.scalar(day + timedelta(days=1))))
    add_file(db_path, morning, "morning")
    refresh(db_path, CONFIG)
    daily_before = table_frame(db_path, "rollup_daily", GATE_KEYS["rollup_hist"][:6])
    add_file(db_path, afternoon, "afternoon")

    added = refresh(db_path, CONFIG, batch=True)

    assert not added.full and added.days == [] and added.groups == 0
    assert added.added == [("4.12", day.date())] and added.batch_rows == afternoon.num_rows
    assert str(added).startswith(f"rollup {afternoon.num_rows} new rows added to 4.12 ({day.date()}) (intra-day")
    with_batch = {t: table_frame(db_path, t, k) for t, k in GATE_KEYS.items()}
    assert table_frame(db_path, "rollup_daily", GATE_KEYS["rollup_hist"][:6]).equals(daily_before)
    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("SELECT * FROM rollup_provisional_days").fetchall() == [("4.12", day.date())]
    con.close()

    whole = refresh(db_path, CONFIG)  # the nightly's: recomputes the provisional day from its events

    assert whole.days == [("4.12", day.date())] and whole.added == []
    recomputed = {t: table_frame(db_path, t, k) for t, k in GATE_KEYS.items()}
    assert recomputed["rollup_hist"].equals(with_batch["rollup_hist"])  # counts add up exactly
    # sums taken in another order (a device-day's total_ms) may differ in the last bit
    assert_frame_equal(with_batch["rollup_device_day"], recomputed["rollup_device_day"], check_exact=False,
                       rel_tol=1e-12)
    rebuilt = refresh(db_path, CONFIG, full=True)
    assert rebuilt.full
    for t, k in GATE_KEYS.items():
        assert table_frame(db_path, t, k).equals(recomputed[t]), t
    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("SELECT count(*) FROM rollup_provisional_days").fetchall() == [(0,)]
    con.close()
    assert refresh(db_path, CONFIG, batch=True).added == []


def test_days_recomputed_in_chunks_give_the_rollup_of_one_pass(db_path, tmp_path, monkeypatch):
    table = generate("4.12", 12_000, "postmortem", seed=8, start=START, days=4)
    add_file(db_path, table, "a")
    refresh(db_path, CONFIG)
    keys = ["release", "day", "task", "route", "device_tier", "network_bucket"]
    one_pass = rollup(db_path).sort(keys)
    monkeypatch.setattr(aggregate, "CHUNK_ROWS", 4_000)  # about a day (3,000 rows) per chunk

    chunked = refresh(db_path, CONFIG, full=True)

    assert len(chunked.days) == 4 and chunked.groups == one_pass.height
    # sums taken in another order (a device's day of total_ms) may differ in the last bit
    assert_frame_equal(rollup(db_path).sort(keys), one_pass, check_exact=False, rel_tol=1e-12)


def test_day_chunks_hold_whole_days_within_the_budget():
    assert day_chunks([], 10) == []
    assert day_chunks([3, 3, 3, 3], 7) == [(1, 2), (3, 4)]
    assert day_chunks([3, 12, 2, 2], 7) == [(1, 1), (2, 2), (3, 4)]  # a bigger day is a chunk of its own
    assert day_chunks([5], 1) == [(1, 1)]


READ_ONLY = "only read statements run here"


@pytest.mark.parametrize(("sql", "refusal"), [
    ("INSERT INTO events SELECT * FROM events", f"INSERT is refused: {READ_ONLY}"),
    ("DELETE FROM events", f"DELETE is refused: {READ_ONLY}"),
    ("DROP TABLE events", f"DROP is refused: {READ_ONLY}"),
    ("ATTACH '/tmp/other.duckdb' AS other", f"ATTACH is refused: {READ_ONLY}"),
    ("COPY events TO '/tmp/stolen.csv'", f"COPY is refused: {READ_ONLY}"),
    ("SELECT * FROM read_csv('/etc/passwd')", "refused or failed (the warehouse is read-only here): "),
    ("SET enable_external_access = true", f"SET is refused: {READ_ONLY}"),
    ("SELECT 1; DROP TABLE events", "give exactly one statement, got 2"),
])
def test_ad_hoc_sql_cannot_write_attach_or_read_files(db_path, sql, refusal):
    """Writes are refused by statement class before they run; a read of a file by the sandbox."""
    add_file(db_path, valid_table(50, seed=12), "x")
    before = counts(db_path)
    proc = run_cli("sql", "--db", str(db_path), sql)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"pipeline sql: error: {refusal}"), proc.stderr
    assert proc.stderr.count("\n") == 1
    assert counts(db_path) == before


def test_query_params_are_values_not_sql(db_path):
    add_file(db_path, generate("4.12", 5_000, "healthy", seed=8, start=START, days=2), "x")
    refresh(db_path, CONFIG)
    ok = run_cli("query", "edge_vs_cloud_latency", "--db", str(db_path), "--param", "release=4.12",
                 "--format", "csv")
    assert ok.returncode == 0, ok.stderr
    rows = list(csv.DictReader(io.StringIO(ok.stdout)))
    assert [r["network_bucket"] for r in rows] == ["normal", "offline", "weak"]
    evil = run_cli("query", "edge_vs_cloud_latency", "--db", str(db_path), "--param",
                   "release=4.12' OR 1=1 --", "--format", "csv")
    # a value, not SQL: no release has that name, which every command answers the same way
    assert evil.returncode == 2 and evil.stdout == ""
    assert evil.stderr.startswith("pipeline query: error: no release \"4.12' OR 1=1 --\" in the database; "
                                  "releases present: 4.12.")
    unknown = run_cli("query", "edge_vs_cloud_latency", "--db", str(db_path), "--param", "rel=4.12")
    assert unknown.returncode == 2 and "unknown parameter 'rel'" in unknown.stderr
    listing = run_cli("query", "--list")
    for name in ("fallback_rate", "edge_vs_cloud_latency", "memory_by_tier", "thermal", "adoption",
                 "quarantine_reasons", "ingest_history"):
        assert name in listing.stdout


def test_daily_edge_cap_counts_a_devices_whole_day(db_path):
    """400 s of rewrite and 300 s of intent on one day is 700 s: over the 600 s cap in both groups."""
    table = valid_table(2, seed=13)
    day = datetime(2026, 11, 21, 10)
    for i, (task, ms) in enumerate([("rewrite", 400_000.0), ("intent", 300_000.0)]):
        table = with_values(table, i, task=task, total_ms=ms, ttft_ms=100.0, device_id="dev-1", route="edge",
                            event_time=day, network_type="wifi", rtt_ms=20.0, device_tier="mid", auto_fallback=False)
    add_file(db_path, table, "cap")
    refresh(db_path, CONFIG)
    got = rollup(db_path).select("task", "device_days", "device_days_over_cap_share").sort("task").rows()
    assert got == [("intent", 1, 1.0), ("rewrite", 1, 1.0)]
