"""The mergeable quantile sketch on DuckDB (no JVM): buckets as the SQL writes them, quantiles within the
documented relative error, days that merge exactly, and the gate on the sketch beside the exact gate."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import interval_covers, run_cli

from pipeline.common.config import EngineSettings, load_config
from pipeline.gate import stats
from pipeline.gate.evaluate import evaluate_gate
from pipeline.planning.simulate import generate
from pipeline.warehouse import db, sketch
from pipeline.warehouse.aggregate import refresh, use_settings

START = datetime(2026, 11, 20)
AS_OF = datetime(2026, 11, 27)
EXACT = load_config()
SKETCH = dataclasses.replace(EXACT, engine=EngineSettings(quantiles="sketch"))
E = SKETCH.engine.sketch_relative_error


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


def test_rollup_keeps_histograms_only_for_the_sketch_and_a_change_rebuilds(db_path):
    load(db_path, generate("4.12", 5_000, "healthy", seed=2, start=START, days=7))
    refresh(db_path, EXACT, now=AS_OF)
    with db.reading(db_path) as con:
        assert con.execute("SELECT count(*) FROM rollup_hist").fetchone() == (0,)
    result = refresh(db_path, SKETCH, now=AS_OF)
    assert result.full  # the digest names the histograms: switching the estimator rebuilds the rollup
    with db.reading(db_path) as con:
        per_day = con.execute("SELECT day, sum(n) FROM rollup_hist WHERE figure = 'total' GROUP BY day "
                              "ORDER BY day").fetchall()
        rows = con.execute("SELECT CAST(event_time AS DATE) AS day, count(*) FROM events GROUP BY day "
                           "ORDER BY day").fetchall()
    assert per_day == rows  # total_ms is never null: one count per row


def test_gate_on_the_sketch_gives_the_exact_decisions_and_p95s_within_the_error(db_path):
    load(db_path, generate("4.12", 60_000, "postmortem", seed=1, start=START, days=7))
    refresh(db_path, SKETCH, now=AS_OF)
    exact, approx = gate(db_path, EXACT), gate(db_path, SKETCH)
    assert approx.to_dict()["quantiles"] == {"estimator": "log_histogram", "relative_error": E, "engine": "duckdb"}
    assert exact.to_dict()["quantiles"] == {"estimator": "exact", "relative_error": None, "engine": "duckdb"}
    assert (approx.verdict, approx.exit_code) == (exact.verdict, exact.exit_code) == ("rollback_to_cloud", 1)
    compared = 0
    for s_exact, s_approx in zip(exact.segments, approx.segments, strict=True):
        assert s_exact.key == s_approx.key and s_exact.decision == s_approx.decision
        for name in ("peak_memory", "resident_memory", "inference_duration", "cold_start", "thermal"):
            a, b = s_exact.checks[name], s_approx.checks[name]
            assert a.status == b.status or b.borderline, (s_exact.key, name)
            if a.measured is not None:
                assert abs(b.measured - a.measured) <= E * abs(a.measured) + 1e-12
                assert interval_covers(b.interval, a.interval)
                assert b.sql == "sql/gate/segment_counts.sql, sql/gate/segment_histograms.sql"
                compared += 1
    assert compared > 100


def test_the_sketch_window_is_whole_days_and_a_stale_rollup_is_refused(db_path):
    load(db_path, generate("4.12", 3_000, "healthy", seed=3, start=START, days=7))
    with pytest.raises(Exception, match="there is no rollup yet; run: pipeline aggregate --engine duckdb"):
        gate(db_path, SKETCH)
    refresh(db_path, SKETCH, now=AS_OF)
    result = gate(db_path, SKETCH, as_of=datetime(2026, 11, 27, 2, 30))
    assert result.as_of == datetime(2026, 11, 27)  # the sketch reads whole UTC days
    other = dataclasses.replace(SKETCH, engine=EngineSettings(quantiles="sketch", sketch_relative_error=0.01))
    with pytest.raises(Exception, match="built with other settings"):
        gate(db_path, other)


def test_cli_gate_names_the_estimator_and_refuses_a_stale_rollup(tmp_path):
    config = tmp_path / "sketch.yaml"
    config.write_text(Path(EXACT.source).read_text() + "\nengine:\n  quantiles: sketch\n")
    db_file = load(tmp_path / "t.duckdb", generate("4.12", 3_000, "healthy", seed=4, start=START, days=7))
    done = run_cli("gate", "--db", str(db_file), "--config", str(config), "--release", "4.12",
                   "--as-of", "2026-11-27", "--dry-run", "--json")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "pipeline gate: error: the gate reads its p95s from the rollup's histograms (engine.quantiles: sketch), "
        f"and there is no rollup yet; run: pipeline aggregate --engine duckdb --config {config}")


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
