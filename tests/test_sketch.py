"""The mergeable quantile sketch on DuckDB (no JVM): buckets as the SQL writes them, quantiles within the
documented relative error, days that merge exactly, and the gate's p95s (read from the rollup's histograms)
beside the exact p95s of the window's events."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import run_cli

from pipeline.common.config import EngineSettings, load_config
from pipeline.gate import stats
from pipeline.gate.evaluate import evaluate_gate
from pipeline.planning.simulate import generate
from pipeline.warehouse import db, sketch
from pipeline.warehouse.aggregate import refresh, use_settings

START = datetime(2026, 11, 20)
AS_OF = datetime(2026, 11, 27)
CONFIG = load_config()
E = CONFIG.engine.sketch_relative_error


def load(db_path: Path, table: pa.Table) -> Path:
    with db.writing(db_path) as con:
        con.register("t", table)
        con.execute("INSERT INTO events BY NAME SELECT *, 1 AS file_id FROM t")  # file_id 1: the rollup folds it in
        con.unregister("t")
    return db_path


def gate(db_path: Path, config, as_of: datetime = AS_OF):
    with db.reading(db_path) as con:
        use_settings(con, config)
        return evaluate_gate(con, "4.12", config, as_of=as_of)


def test_buckets_are_the_sql_buckets_and_every_value_is_within_the_error(db_path):
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.lognormal(8, 1.5, 3000), -rng.lognormal(0, 2, 500), [0.0, 1.0, 1e-12, 3.6e6]])
    with db.writing(db_path) as con:
        con.register("v", pa.table({"x": values}))
        got = [r[0] for r in con.execute(
            "SELECT CASE WHEN x > 1e-9 THEN 1000000 + CAST(ceil(ln(x) / $g) AS BIGINT) "
            "WHEN x < -1e-9 THEN -1000000 - CAST(ceil(ln(-x) / $g) AS BIGINT) ELSE 0 END FROM v",
            {"g": sketch.log_gamma(E)}).fetchall()]
    assert got == [sketch.bucket_of(float(x), E) for x in values]
    represented = sketch.bucket_values(np.array(got), E)
    assert np.all(np.abs(represented - values) <= E * np.abs(values) + 1e-9)
    order = np.argsort(got, kind="stable")
    assert np.all(np.diff(values[order]) >= -np.abs(values[order][1:]) * 2 * E)  # buckets sort the values


@pytest.mark.parametrize("n", [1, 2, 7, 150, 20_000])
def test_quantiles_are_quantile_cont_within_the_error_and_days_merge_exactly(n):
    rng = np.random.default_rng(n)
    values = rng.lognormal(8.5, 0.6, n)
    fractions = [0.95, *stats.QUANTILE_GRID]
    exact = np.quantile(values, fractions, method="linear")  # quantile_cont
    buckets = np.array([sketch.bucket_of(float(x), E) for x in values])
    keys, counts = np.unique(buckets, return_counts=True)
    estimate = np.array(sketch.quantiles(keys, counts, fractions, E))
    assert np.all(np.abs(estimate - exact) <= E * np.abs(exact) * (1 + 1e-12))
    halves = [np.unique(buckets[: n // 2], return_counts=True), np.unique(buckets[n // 2:], return_counts=True)]
    merged = {}
    for k, c in halves:
        for key, count in zip(k.tolist(), c.tolist(), strict=True):
            merged[key] = merged.get(key, 0) + count
    assert sketch.quantiles(list(merged), list(merged.values()), fractions, E) == estimate.tolist()


def test_rollup_histograms_count_every_value_and_a_new_error_rebuilds(db_path):
    load(db_path, generate("4.12", 5_000, "healthy", seed=2, start=START, days=7))
    refresh(db_path, CONFIG, now=AS_OF)
    with db.reading(db_path) as con:
        per_day = con.execute("SELECT day, sum(n) FROM rollup_hist WHERE figure = 'total' GROUP BY day "
                              "ORDER BY day").fetchall()
        rows = con.execute("SELECT CAST(event_time AS DATE) AS day, count(*) FROM events GROUP BY day "
                           "ORDER BY day").fetchall()
    assert per_day == rows  # total_ms is never null: one count per row
    coarser = dataclasses.replace(CONFIG, engine=EngineSettings(sketch_relative_error=0.01))
    assert refresh(db_path, coarser, now=AS_OF).full  # the digest names the histograms' error


EXACT_P95 = """
SELECT task, device_tier, network_bucket, quantile_cont(peak_mem_ratio, 0.95) AS peak,
       quantile_cont(resident_mem_ratio, 0.95) AS resident, quantile_cont(total_ms, 0.95) AS total,
       quantile_cont(cold_start_ms, 0.95) AS cold, quantile_cont(temp_rise_c, 0.95) AS rise
FROM events_enriched
WHERE release = '4.12' AND on_device AND event_time >= $start AND event_time < $end
GROUP BY ALL
"""


def test_gate_p95s_are_the_exact_p95s_within_the_error(db_path):
    load(db_path, generate("4.12", 60_000, "postmortem", seed=1, start=START, days=7))
    refresh(db_path, CONFIG, now=AS_OF)
    result = gate(db_path, CONFIG)
    assert result.to_dict()["quantiles"] == {"estimator": "log_histogram", "relative_error": E, "engine": "duckdb"}
    assert result.source.kind == "rollup" and (result.verdict, result.exit_code) == ("rollback_to_cloud", 1)
    with db.reading(db_path) as con:
        exact = {(r[0], r[1], r[2]): r[3:] for r in con.execute(
            EXACT_P95, {"start": result.window_start, "end": result.window_end}).fetchall()}
    compared = 0
    figures = ("peak_memory", "resident_memory", "inference_duration", "cold_start", "thermal")
    for segment in result.segments:
        for name, p95 in zip(figures, exact[(segment.task, segment.device_tier, segment.network_bucket)],
                             strict=True):
            check = segment.checks[name]
            if check.measured is not None:
                assert abs(check.measured - p95) <= E * abs(p95) + 1e-12, (segment.key, name)
                assert check.sql == "sql/gate/segment_counts.sql, sql/gate/segment_histograms.sql"
                compared += 1
    assert compared > 100


def test_a_rollup_that_cannot_answer_is_replaced_by_the_window_s_events_and_said_so(db_path):
    load(db_path, generate("4.12", 3_000, "healthy", seed=3, start=START, days=7))
    before = gate(db_path, CONFIG, as_of=datetime(2026, 11, 27, 2, 30))
    assert before.source.kind == "events" and before.source.reason.startswith("no rollup yet: rolled up from")
    refresh(db_path, CONFIG, now=AS_OF)
    after = gate(db_path, CONFIG, as_of=datetime(2026, 11, 27, 2, 30))
    assert after.source.kind == "rollup" and after.window_end == datetime(2026, 11, 27)  # whole UTC days
    assert after.to_dict()["segments"] == before.to_dict()["segments"]
    other = dataclasses.replace(CONFIG, engine=EngineSettings(sketch_relative_error=0.01))
    assert "built with other settings" in gate(db_path, other).source.reason


def test_cli_gate_says_where_it_read_from(tmp_path):
    db_file = load(tmp_path / "t.duckdb", generate("4.12", 3_000, "healthy", seed=4, start=START, days=7))
    done = run_cli("gate", "--db", str(db_file), "--release", "4.12", "--as-of", "2026-11-27", "--dry-run",
                   "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["source"] == {
        "kind": "events", "reason": "no rollup yet: rolled up from the window's events for this evaluation; "
                                    "`pipeline aggregate --engine duckdb` lets the gate read the rollup"}


def test_order_statistics_are_quantile_disc_within_the_error():
    """For a gate SQL that reads true order statistics (quantile_disc), the sketch gives the same ranks."""
    import duckdb

    rng = np.random.default_rng(11)
    fractions = [0.95, 0.81, 0.5, 0.0, 1.0, *stats.QUANTILE_GRID]
    with duckdb.connect() as con:
        for n in (1, 3, 300, 4_321):
            values = rng.lognormal(6, 1, n)
            con.register(f"v{n}", pa.table({"x": values}))
            exact = con.execute(f"SELECT quantile_disc(x, $f) FROM v{n}", {"f": fractions}).fetchall()[0][0]
            buckets = np.array([sketch.bucket_of(float(x), E) for x in values])
            keys, counts = np.unique(buckets, return_counts=True)
            got = sketch.order_statistics(keys, counts, fractions, E)
            assert all(abs(g - x) <= E * abs(x) * (1 + 1e-12) for g, x in zip(got, exact, strict=True)), n
            # the same rank: the exact value lies in the bucket the sketch read
            assert [sketch.bucket_of(x, E) for x in exact] == [sketch.bucket_of(g, E) for g in got]
