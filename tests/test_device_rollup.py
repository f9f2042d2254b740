"""The gate read from the rollups against the gate read from raw events, figure by figure, on one warehouse:
after loads, a late file, replaced rows and a budget change (issue 29). And the window both use."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline.common.config import load_config
from pipeline.common.registry import GATE_NAMES
from pipeline.gate import source, stats
from pipeline.gate.evaluate import evaluate_gate
from pipeline.gate.window import gate_window
from pipeline.ingest.run import ingest
from pipeline.planning.simulate import Population, generate
from pipeline.warehouse import db
from pipeline.warehouse.aggregate import refresh, use_settings

START = datetime(2026, 11, 20)
AS_OF = datetime(2026, 11, 27, 15, 30)  # mid-day: the window is the 7 whole days before the 27th
BASE = load_config()
CONFIG = dataclasses.replace(  # devices assigned and a 2-day horizon: retention is measured within 7 days
    BASE, assignment=dataclasses.replace(BASE.assignment, unit="device"),
    gates=dataclasses.replace(BASE.gates, retention=dataclasses.replace(BASE.gates.retention, horizon_days=2)))
DEVICES = Population(holdback_share=0.2)  # whole devices held back: retention is measured


def write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def evaluate(db_path: Path, config, from_events: bool):
    with db.reading(db_path) as con:
        use_settings(con, config)
        return evaluate_gate(con, "4.12", config, as_of=AS_OF, from_events=from_events)


def differences(a, b, path: str = "") -> list[str]:
    """Where two gate outputs differ (floats to 1e-9 relative: sums taken in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        same = math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
        return [] if same else [f"{path}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def assert_same_gate(db_path: Path, config) -> dict:
    rolled, raw = evaluate(db_path, config, False), evaluate(db_path, config, True)
    assert rolled.source.kind == source.ROLLUP and raw.source.kind == source.EVENTS
    a, b = rolled.to_dict(), raw.to_dict()
    for d in (a, b):
        d.pop("evaluated_at"), d.pop("source")
    assert differences(a, b) == []
    return a


def measured_gates(out: dict) -> set[str]:
    """The gates with a decided status other than not_applicable in some segment or release-wide check."""
    checks = [(g, c) for s in out["segments"] for g, c in s["metrics"].items()] + list(out["release_wide"].items())
    return {g for g, c in checks if c["status"] in ("pass", "fail")}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    """4.12 post-mortem-like over 7 days, whole devices held back, ingested and rolled up."""
    folder = tmp_path_factory.mktemp("device-rollup")
    first = generate("4.12", 40_000, "postmortem", seed=29, start=START, days=7, population=DEVICES)
    db_path = folder / "w.duckdb"
    ingest(db_path, [write(first, folder / "first.parquet")], now=AS_OF)
    refresh(db_path, CONFIG, now=AS_OF)
    return db_path


def test_every_gate_reads_the_same_figures_from_the_rollup_as_from_events(warehouse):
    out = assert_same_gate(warehouse, CONFIG)
    assert measured_gates(out) == set(GATE_NAMES)
    assert out["window"]["start"] == "2026-11-13T00:00:00Z" and out["window"]["end"] == "2026-11-27T00:00:00Z"


def test_late_rows_and_replaced_rows_update_exactly_the_device_days_they_touch(warehouse, tmp_path):
    first = pq.read_table(warehouse.parent / "first.parquet")
    day = pc.equal(pc.cast(first["event_time"], pa.date32()), pa.scalar(datetime(2026, 11, 23).date()))
    stored = first.filter(day).slice(0, 300)
    with db.reading(warehouse) as con:
        before = dict(con.execute("SELECT day, count(*) FROM rollup_device_day GROUP BY day").fetchall())
    # replaced: earlier copies of 300 stored events (an earlier copy wins), moved to the day before, now failed
    earlier = stored.set_column(stored.schema.get_field_index("event_time"), "event_time",
                                pc.subtract(stored["event_time"], pa.scalar(timedelta(days=1))))
    earlier = earlier.set_column(earlier.schema.get_field_index("outcome"), "outcome",
                                 pa.array(["failed"] * earlier.num_rows))
    # late: new rows of the 25th
    late = generate("4.12", 2_000, "postmortem", seed=30, start=START + timedelta(days=5), days=1, population=DEVICES)
    files = [write(earlier, tmp_path / "replaced.parquet"), write(late, tmp_path / "late.parquet")]
    result = ingest(warehouse, files, now=AS_OF)
    assert sum(f.accepted for f in result.files) == 2_300

    refreshed = refresh(warehouse, CONFIG, now=AS_OF)

    assert sorted(str(d) for _, d in refreshed.days) == ["2026-11-22", "2026-11-23", "2026-11-25"]
    with db.reading(warehouse) as con:
        after = dict(con.execute("SELECT day, count(*) FROM rollup_device_day GROUP BY day").fetchall())
    assert {d for d in after if after[d] != before[d]} <= {datetime(2026, 11, d).date() for d in (22, 23, 25)}
    assert_same_gate(warehouse, CONFIG)


def test_a_budget_change_rebuilds_the_rollup_and_the_gate_follows_it(warehouse):
    stricter = dataclasses.replace(CONFIG, gates=dataclasses.replace(
        CONFIG.gates, inference_duration=dataclasses.replace(CONFIG.gates.inference_duration, max_p95_ms=2_000.0)))
    with db.reading(warehouse) as con:
        reason = source.stale_reason(con, stricter)
    assert reason is not None and reason.startswith("the rollup was built with other settings")
    stale = evaluate(warehouse, stricter, False)  # the stored rollup cannot answer: read from events, said why
    assert stale.source.kind == source.EVENTS and "other settings" in stale.source.reason

    rebuilt = refresh(warehouse, stricter, now=AS_OF)

    assert rebuilt.full
    out = assert_same_gate(warehouse, stricter)
    before = evaluate(warehouse, CONFIG, True).to_dict()
    over = [s["metrics"]["inference_duration"].get("share_over_budget", 0) for s in out["segments"]]
    was = [s["metrics"]["inference_duration"].get("share_over_budget", 0) for s in before["segments"]]
    assert all(a >= b for a, b in zip(over, was, strict=True)) and over != was
    refresh(warehouse, CONFIG, now=AS_OF)  # back to the shipped budgets for the other tests


@pytest.mark.parametrize(("as_of", "lag", "start", "end"), [
    (datetime(2026, 11, 27, 15, 30), 0, datetime(2026, 11, 13), datetime(2026, 11, 27)),
    (datetime(2026, 11, 27, 0, 0), 0, datetime(2026, 11, 13), datetime(2026, 11, 27)),
    (datetime(2026, 11, 27, 3, 0), 6, datetime(2026, 11, 12), datetime(2026, 11, 26)),
])
def test_the_window_is_whole_days_before_the_cutoff_day(as_of, lag, start, end):
    window = gate_window(as_of, dataclasses.replace(BASE, completeness_lag_hours=lag))
    assert (window.start, window.end, window.days) == (start, end, 14)
    assert window.to_dict()["not_yet_judged"]["end"] == (as_of - timedelta(hours=lag)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_anova_design_effect_known_values():
    # two devices, 3 values each: ln x = (0, 0, 0) and (1, 1, 1): all variance between devices, rho = 1
    assert stats.anova_design_effect(2, 6, 18, 3.0, 3.0, 3.0) == pytest.approx(3.0)
    # within-device spread only: (0, 1) and (0, 1): device means equal, rho = 0
    assert stats.anova_design_effect(2, 4, 8, 2.0, 2.0, 1.0) == pytest.approx(1.0)
    # one value per device: nothing to correlate; one device: fully correlated
    assert stats.anova_design_effect(5, 5, 5, 1.0, 2.0, 2.0) == 1.0
    assert stats.anova_design_effect(1, 4, 16, 1.0, 2.0, 0.25) == 4.0


def test_a_warehouse_from_before_the_device_day_rollup_is_judged_from_its_events(tmp_path):
    """A file no writer has opened since the upgrade has no rollup_device_day: the read-only gate rolls the
    window's events up into temporary tables and says why."""
    db_path = tmp_path / "old.duckdb"
    ingest(db_path, [write(generate("4.12", 5_000, "healthy", seed=31, start=START, days=7), tmp_path / "a.parquet")],
           now=AS_OF)
    with db.writing(db_path) as con:
        con.execute("DROP TABLE rollup_device_day")
    with db.reading(db_path) as con:
        use_settings(con, BASE)
        result = evaluate_gate(con, "4.12", BASE, as_of=AS_OF)
    assert result.source.kind == source.EVENTS and result.source.reason.startswith("no rollup yet")
    assert sum(s.rows for s in result.segments) > 0
