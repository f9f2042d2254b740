"""routing.previous_edge end to end: two releases' telemetry through `pipeline nightly` to the routing file and
the alert; the previous release's edge model takes a failing segment only where it passed, and only when the
config says the app keeps it (docs/rollout.md "The previous edge model")."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pipeline.common.config import DEFAULT_CONFIG
from pipeline.planning.simulate import write_parquet
from pipeline.rollout.previous import version_key
from tests.conftest import run_cli

START = datetime(2026, 11, 17)
AS_OF = "2026-12-01"


def _nightly(folder: Path, previous_scenario: str, previous_edge: bool) -> tuple[dict, list[dict]]:
    landing = folder / "landing"
    write_parquet(landing, "9.9", 60_000, previous_scenario, 5, start=START, days=14)
    write_parquet(landing, "9.10", 100_000, "chip_regression", 3, start=START, days=14)
    config = folder / "admission.yaml"
    text = DEFAULT_CONFIG.read_text().replace('  jsonl_path: ""', f'  jsonl_path: "{folder / "alerts.jsonl"}"')
    assert "\n  previous_edge: false" in text
    if previous_edge:
        text = text.replace("\n  previous_edge: false", "\n  previous_edge: true")
    config.write_text(text)
    done = run_cli("nightly", "--landing", str(landing), "--db", str(folder / "t.duckdb"), "--as-of", AS_OF,
                   "--config", str(config), "--routing-dir", str(folder / "routing"))
    assert done.returncode == 0, done.stderr
    table = json.loads((folder / "routing" / "routing-9.10.json").read_text())
    alerts = [json.loads(line) for line in (folder / "alerts.jsonl").read_text().splitlines()]
    return table, [a for a in alerts if a["release"] == "9.10"]


def test_a_failing_segment_goes_back_to_the_previous_edge_model_where_it_passed(tmp_path: Path) -> None:
    table, alerts = _nightly(tmp_path, "healthy", previous_edge=True)
    low = [r for r in table["routes"] if r["device_tier"] == "low" and r["state"] == "rolled_back"]
    assert len(low) >= 6
    for r in low:
        assert (r["route"], r["model_id"], r["previous_release"]) == ("previous_edge", "llama3.2-1b-int4", "9.9")
        assert "the previous release 9.9's edge model llama3.2-1b-int4 passed here" in r["reason"]
    assert {r["route"] for r in table["routes"] if r["device_tier"] != "low"} <= {"edge", "edge_with_cloud_check"}
    assert len(alerts) == 1
    text = alerts[0]["text"]
    assert text.splitlines()[0] == (f"Release 9.10: partial rollback: {len(low)} of {len(table['routes'])} segments "
                                    f"rolled back: {len(low)} to the previous edge model")
    assert "-> previous_edge (llama3.2-1b-int4 of release 9.9)" in text
    assert {f["route"] for f in alerts[0]["failing_segments"]} == {"previous_edge"}


def test_no_previous_edge_where_the_previous_release_failed_or_when_the_app_keeps_none(tmp_path: Path) -> None:
    # the previous build failed the low tier too: its model is no fallback there
    table, alerts = _nightly(tmp_path / "failed", "low_tier_memory", previous_edge=True)
    low = [r for r in table["routes"] if r["device_tier"] == "low" and r["state"] == "rolled_back"]
    assert low and {r["route"] for r in low} == {"cloud"}
    assert all("model_id" not in r for r in table["routes"])
    assert "previous_edge" not in alerts[0]["text"]
    # the same releases without routing.previous_edge: the cloud, as before
    table, alerts = _nightly(tmp_path / "off", "healthy", previous_edge=False)
    assert {r["route"] for r in table["routes"] if r["state"] == "rolled_back"} == {"cloud"}
    assert "previous_edge" not in alerts[0]["text"]


def test_versions_order_as_numbers() -> None:
    assert sorted(["4.10", "4.9", "4.11", "4.9.1", "5.0-beta"], key=version_key) == \
        ["4.9", "4.9.1", "4.10", "4.11", "5.0-beta"]
