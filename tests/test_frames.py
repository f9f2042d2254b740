"""The notebook API (pipeline.open, pipeline/views/frames.py) on the demo warehouse: each frame holds what the
CLI's JSON says for the same question."""

from __future__ import annotations

import json
from datetime import date, datetime

import polars as pl
import pytest
from conftest import DEMO_AS_OF, run_cli

import pipeline
from pipeline.common.errors import UsageError


def cli_json(demo_dir, *args: str):
    done = run_cli(*args, "--db", str(demo_dir / "telemetry.duckdb"))
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def plain(value):
    """A frame's value as the CLI's JSON writes it."""
    if isinstance(value, datetime):
        return value.isoformat() + "+00:00"
    if isinstance(value, date):
        return value.isoformat()
    return value


def rows_of(frame: pl.DataFrame) -> list[dict]:
    return [{k: plain(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


@pytest.fixture(scope="module")
def wh(demo_dir):
    return pipeline.open(str(demo_dir / "telemetry.duckdb"))


def test_a_named_query_is_the_cli_query(demo_dir, wh):
    frame = wh.query("fallback_rate", release="4.12")
    printed = cli_json(demo_dir, "query", "fallback_rate", "--param", "release=4.12", "--format", "json")
    assert frame.columns == list(printed[0])
    key = lambda r: (r["day"], r["device_tier"], r["network_bucket"], r["side"])  # noqa: E731
    assert sorted(rows_of(frame), key=key) == sorted(printed, key=key)
    assert len(printed) > 20


def test_fallback_rate_by_bucket_weighs_the_days_by_their_rows(demo_dir, wh):
    frame = wh.fallback_rate(release="4.12", by=["network_bucket"])
    assert frame.columns == ["network_bucket", "side", "rows", "fallback_rate", "auto_fallback_rate"]
    daily = cli_json(demo_dir, "query", "fallback_rate", "--param", "release=4.12", "--format", "json")
    for row in frame.iter_rows(named=True):
        days = [d for d in daily if (d["network_bucket"], d["side"]) == (row["network_bucket"], row["side"])]
        rows = sum(d["rows"] for d in days)
        assert row["rows"] == rows
        assert row["fallback_rate"] == pytest.approx(sum(d["fallback_rate"] * d["rows"] for d in days) / rows,
                                                     abs=5e-5)
    assert set(frame["network_bucket"]) == {"normal", "weak", "offline"}


def test_segments_are_the_gates_json(demo_dir, wh):
    frame = wh.segments("4.12", as_of=DEMO_AS_OF)
    printed = cli_json(demo_dir, "gate", "--release", "4.12", "--as-of", DEMO_AS_OF, "--json")["segments"]
    assert frame.height == len(printed) == 36
    by_key = {(s["task"], s["device_tier"], s["network_bucket"]): s for s in printed}
    for row in frame.iter_rows(named=True):
        seg = by_key[(row["task"], row["device_tier"], row["network_bucket"])]
        assert (row["decision"], row["failed_gates"], row["rows"]) == (seg["decision"], seg["failed_gates"],
                                                                       seg["rows"])
        assert row["quality_loss_measured"] == seg["metrics"]["quality_loss"]["measured"]
        assert row["peak_memory_status"] == seg["metrics"]["peak_memory"]["status"]
    assert frame.filter(pl.col("decision") == "rollback_to_cloud").height == sum(
        s["decision"] == "rollback_to_cloud" for s in printed) > 0


def test_evaluations_and_quarantine_are_the_cli_lists(demo_dir, wh):
    assert rows_of(wh.evaluations("4.12")) == cli_json(demo_dir, "history", "--release", "4.12", "--json")
    quarantined = cli_json(demo_dir, "query", "quarantine_reasons", "--format", "json")
    assert rows_of(wh.quarantine()) == quarantined and len(quarantined) > 0


def test_a_wrong_name_or_file_says_what_is_known(demo_dir, wh, tmp_path):
    with pytest.raises(UsageError, match="no query 'fallback'; known: "):
        wh.query("fallback")
    with pytest.raises(UsageError, match="'tier' is not one of release, day, device_tier, network_bucket"):
        wh.fallback_rate(by=["tier"])
    with pytest.raises(UsageError, match="no warehouse here"):
        pipeline.open(str(tmp_path / "none.duckdb"))
