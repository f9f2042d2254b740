"""`pipeline drill` on real warehouses: the injected device cell of chip_regression found first and named, no
flag on a healthy release, cells that add up to the gate's own counts, and usage errors (docs/drill-down.md)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.common.config import load_config
from pipeline.gate.drill import OTHER, drill, parse_dimensions
from pipeline.gate.evaluate import evaluate_gate
from pipeline.planning.simulate import write_parquet
from pipeline.warehouse import db
from tests.conftest import run_cli

AS_OF = "2026-12-01"
START = datetime(2026, 11, 17)
INJECTED = {"soc": "helio-g85", "os_version": "android-14", "npu_ready": "false"}


def _warehouse(folder: Path, scenario: str, seed: int, rows: int = 100_000) -> Path:
    write_parquet(folder / "landing", "9.0", rows, scenario, seed, start=START, days=14)
    path = folder / "telemetry.duckdb"
    assert main(["ingest", str(folder / "landing"), "--db", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def chip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _warehouse(tmp_path_factory.mktemp("chip"), "chip_regression", 3)


def _drill(path: Path, *args: str) -> dict:
    done = run_cli("drill", "--release", "9.0", "--db", str(path), "--as-of", AS_OF, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_chip_regression_names_the_injected_cell_first(chip: Path) -> None:
    out = _drill(chip)
    assert out["by"] == ["soc", "os_version", "mem_class_gb", "npu_ready", "model_id", "app_version"]
    drills = out["drills"]
    # the low tier rolls back on memory: every failing (segment, gate) is one of them
    assert {d["gate"] for d in drills} == {"peak_memory", "resident_memory"}
    assert {d["segment"].split("/")[1] for d in drills} == {"low"}
    for d in drills:
        first = d["cells"][0]["cell"]
        assert first["soc"] == "helio-g85" and first["os_version"] == "android-14", d["segment"]
        assert first["npu_ready"] in ("false", "*"), d["segment"]
        assert d["cells"][0]["flagged"] is True
        assert d["named"].items() <= INJECTED.items(), d["answer"]
        assert {"soc", "os_version"} <= set(d["named"]), d["answer"]
    big = next(d for d in drills if d["segment"] == "rewrite/low/normal" and d["gate"] == "peak_memory")
    assert big["named"] == INJECTED
    assert big["answer"] == ("100% of the peak memory excess is soc = helio-g85 with os_version = android-14 "
                             "and npu_ready = false")


def test_cells_add_up_to_the_gates_counts(chip: Path) -> None:
    config = load_config()
    with db.reading(chip) as con:
        result = evaluate_gate(con, "9.0", config, as_of=datetime.fromisoformat(AS_OF))
        found = drill(con, result, config, parse_dimensions("soc,os_version,npu_ready"),
                      segments=["rewrite/low/normal"], gates=["peak_memory", "kill_rate", "quality_loss"])
    segment = next(s for s in result.segments if s.key == "rewrite/low/normal")
    by_gate = {d.gate: d for d in found.drills}
    assert sum(c.n for c in by_gate["peak_memory"].cells) == segment.checks["peak_memory"].rows
    assert sum(c.n for c in by_gate["kill_rate"].cells) == segment.checks["kill_rate"].rows  # device-days
    assert all(c.name != OTHER or c.pooled > 0 for c in by_gate["peak_memory"].cells)
    quality = by_gate["quality_loss"]
    assert all(c.cloud is not None for c in quality.cells if c.figure is not None)
    assert found.to_dict()["multiplicity"] == {"method": "benjamini_hochberg", "alpha": pytest.approx(0.05),
                                               "family": "every cell of this drill"}


def test_a_healthy_release_flags_no_cell(tmp_path: Path) -> None:
    path = _warehouse(tmp_path, "healthy", 4)
    out = _drill(path, "--all")
    cells = [c for d in out["drills"] for c in d["cells"]]
    assert len(out["drills"]) > 100 and len(cells) > 1000
    assert [c for c in cells if c["flagged"]] == []
    assert out["not_split"] == []  # the default gates of a passing segment are those a drill can split
    weak = _drill(path, "--segment", "rewrite/mid/weak", "--gate", "weak_network_latency")
    assert weak["drills"] == []
    assert weak["not_split"] == [{"segment": "rewrite/mid/weak", "gate": "weak_network_latency",
                                  "why": "its figure is a ratio of p95s, and the rollup keeps no histogram per cell"}]
    assert _drill(path)["drills"] == []  # nothing rolls back: nothing to drill by default


def test_terminal_view_and_usage_errors(chip: Path) -> None:
    done = run_cli("drill", "--release", "9.0", "--db", str(chip), "--as-of", AS_OF,
                   "--segment", "rewrite/low/normal", "--gate", "peak_memory", "--by", "soc,os_version,npu_ready")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("drill-down of release 9.0 by soc, os_version, npu_ready; window 2026-11-17 .. 2026-11-30 "
                        "UTC (14 whole days)")
    assert ("  100% of the peak memory excess is soc = helio-g85 with os_version = android-14 and npu_ready = false"
            in lines)
    row = next(line for line in lines if line.startswith("  helio-g85 · android-14 · false"))
    assert row.rstrip().endswith("FLAG")
    for args, message in (
            (["--by", "soc,chip"], "pipeline drill: error: --by 'soc,chip': unknown dimension chip; valid: soc, "
                                   "os_version, mem_class_gb, npu_ready, model_id, app_version"),
            (["--segment", "rewrite/low"], "pipeline drill: error: --segment 'rewrite/low': no such segment in "
                                           "release 9.0; segments: "),
            (["--gate", "speed"], "pipeline drill: error: --gate 'speed': no such gate; gates: peak_memory, ")):
        bad = run_cli("drill", "--release", "9.0", "--db", str(chip), "--as-of", AS_OF, *args)
        assert bad.returncode == 2
        assert bad.stderr.startswith(message), bad.stderr
        assert "Traceback" not in bad.stderr


def test_compare_names_the_candidates_losses_on_the_bundled_sample(demo_dir: Path) -> None:
    done = run_cli("compare", "--release", "4.12", "--against", "4.11", "--db", str(demo_dir / "telemetry.duckdb"),
                   "--as-of", AS_OF, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["release"], out["against"], out["by"]) == ("4.12", "4.11", [])
    worse = {(c["segment"], c["gate"]): c for c in out["comparisons"] if c["worse"]}
    slow = worse[("rewrite/low/normal", "inference_duration")]
    assert slow["previous"] < 0.01 < 0.5 < slow["candidate"]
    assert slow["interval"][0] > 0.5 and slow["interval"][1] <= 1
    assert slow["candidate_p95"] > 10_000 > slow["previous_p95"]
    loss = worse[("rewrite/low/normal", "quality_loss")]
    assert loss["margin"] == 0.03 and loss["interval"][0] > 0.03  # a relative loss past the tolerance
    assert {g for (_, g) in worse} >= {"peak_memory", "inference_duration", "thermal", "kill_rate", "quality_loss"}
    # the healthy release against the failing one: nothing is worse
    back = run_cli("compare", "--release", "4.11", "--against", "4.12", "--db", str(demo_dir / "telemetry.duckdb"),
                   "--as-of", AS_OF)
    assert back.returncode == 0, back.stderr
    assert "no segment is worse on 4.11 than on 4.12" in back.stdout.splitlines()
    text = run_cli("compare", "--release", "4.12", "--against", "4.11", "--db", str(demo_dir / "telemetry.duckdb"),
                   "--as-of", AS_OF).stdout.splitlines()
    row = next(line for line in text if line.startswith("rewrite/low/normal") and "inference duration" in line)
    assert row.rstrip().endswith("WORSE") and " -> " in row


def test_compare_usage_errors(demo_dir: Path) -> None:
    db_file = str(demo_dir / "telemetry.duckdb")
    for args, message in (
            (["--against", "4.11", "--by", "app_version"],
             "pipeline compare: error: --by 'app_version': app_version differs between two releases by construction;"
             " compare cells by soc, os_version, mem_class_gb, npu_ready"),
            (["--against", "4.12"], "pipeline compare: error: --against '4.12' is the release itself"),
            (["--against", "3.0"], "pipeline compare: error: no release '3.0' in the database")):
        bad = run_cli("compare", "--release", "4.12", "--db", db_file, "--as-of", AS_OF, *args)
        assert bad.returncode == 2, bad.stderr
        assert bad.stderr.startswith(message), bad.stderr


def test_the_report_draws_the_chip_by_os_map_of_the_failing_gate(chip: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = run_cli("report", "--release", "9.0", "--db", str(chip), "--as-of", AS_OF, "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    answer = re.search(r'<p id="matrix-answer" class="answer">([^<]*)</p>', page)
    assert answer is not None
    assert answer.group(1) == ("rewrite/low/normal: 100% of the peak memory excess is soc = helio-g85 with "
                               "os_version = android-14")
    assert page.index('id="chart-matrix"') < page.index("<h2>Gate table</h2>")  # seen before the tables
    cells = re.findall(r'\{"soc":"helio-g85","os_version":"android-14","figure":([0-9.]+)', page)
    assert cells and float(cells[0]) > 0.5


def test_routing_by_soc_keeps_the_edge_on_the_healthy_chips(chip: Path, tmp_path: Path) -> None:
    from pipeline.common.config import DEFAULT_CONFIG

    config = tmp_path / "by-soc.yaml"
    shipped = DEFAULT_CONFIG.read_text()
    assert "\n  dimensions: []" in shipped
    config.write_text(shipped.replace("\n  dimensions: []", "\n  dimensions: [soc]"))
    tables = {}
    for name, extra in (("plain", []), ("by_soc", ["--config", str(config)])):
        out = tmp_path / f"routing-{name}.json"
        done = run_cli("gate", "--release", "9.0", "--db", str(chip), "--as-of", AS_OF, "--dry-run", "--json",
                       "--routing-out", str(out), *extra)
        assert done.returncode == 1, done.stderr
        tables[name] = (json.loads(done.stdout), json.loads(out.read_text()))
    (plain, plain_routes), (by_soc, soc_routes) = tables["plain"], tables["by_soc"]
    # the whole-segment verdict and routes are the same with and without the cells
    assert by_soc["verdict"] == plain["verdict"] == "partial_rollback"
    assert [s["decision"] for s in by_soc["segments"]] == [s["decision"] for s in plain["segments"]]
    strip = [{k: v for k, v in r.items() if k != "cells"} for r in soc_routes["routes"]]
    assert strip == plain_routes["routes"]
    assert "cells" not in plain and all("cells" not in r for r in plain_routes["routes"])
    assert by_soc["cells"]["dimensions"] == ["soc"]
    # the low tier rolls back on memory; by chip, only helio-g85 leaves the edge there
    entry = next(r for r in soc_routes["routes"] if (r["task"], r["device_tier"], r["network_bucket"])
                 == ("rewrite", "low", "normal"))
    assert entry["route"] == "cloud"
    routes = {c["soc"]: c["route"] for c in entry["cells"]}
    assert routes["helio-g85"] == "cloud"
    assert {routes[s] for s in ("exynos-850", "snapdragon-480", "unisoc-t606")} == {"edge"}
    helio = next(c for c in entry["cells"] if c["soc"] == "helio-g85")
    assert "peak_memory" in helio["reason"]
    # no healthy tier's chip leaves the edge, except the mid tier's injected MediaTek chip
    away = {(r["device_tier"], c["soc"]) for r in soc_routes["routes"] for c in r.get("cells", [])
            if c["route"] != "edge" and r["route"] == "edge"}
    assert away <= {("mid", "dimensity-7050")}, away


def test_a_phone_model_killed_past_plays_per_model_line_is_named(tmp_path: Path) -> None:
    """One chip (the phone model the contract carries) killed on ~10 % of its devices' days, the rest ~0.2 %:
    kill_rate is judged over the tier, and the drill names the chip against the per-model ceiling (8 %, Play's
    per-phone-model line, gates.kill_rate.max_share_per_model) beside the tier's, under Play's dimension name."""
    import polars as pl

    [made] = write_parquet(tmp_path / "made", "9.0", 80_000, "healthy", 4, start=START, days=14)
    day = pl.concat_str([pl.col("device_id"), pl.col("event_time").dt.date().cast(pl.Utf8)]).hash(seed=1)
    hit = (pl.col("soc") == "exynos-1380") & (pl.col("route") != "cloud") & (day % 10 == 0)
    (tmp_path / "landing").mkdir()
    pl.read_parquet(made).with_columns(
        pl.when(hit).then(pl.lit("LMK_KILLED")).otherwise(pl.col("error_code")).alias("error_code"),
        pl.when(hit).then(pl.lit("failed")).otherwise(pl.col("outcome")).alias("outcome"),
    ).write_parquet(tmp_path / "landing" / "part.parquet")
    path = tmp_path / "t.duckdb"
    assert main(["ingest", str(tmp_path / "landing"), "--db", str(path)]) == 0
    out = _drill(path, "--segment", "rewrite/mid/normal", "--gate", "kill_rate", "--by", "soc")
    assert out["play_names"] == {"soc": "deviceSocModel"}
    [d] = out["drills"]
    worst, *rest = d["per_model"]
    assert worst["soc"] == "exynos-1380" and worst["over_ceiling"] and 0.09 < worst["figure"] < 0.12
    assert worst["ceiling"] == 0.08 and not any(m["over_ceiling"] for m in rest)
    assert all(m["figure"] < 0.01 for m in rest)
    assert d["answer"].endswith(f"; soc = exynos-1380 killed on {worst['figure']:.1%} of its device-days, over the "
                                "per-model ceiling 8%")
    # the tier's ceiling (1 %) fails every mid segment for the tier's kills; no other tier
    gate = json.loads(run_cli("gate", "--release", "9.0", "--db", str(path), "--as-of", AS_OF, "--json",
                              "--dry-run").stdout)
    failing = {(s["device_tier"], tuple(s["failed_gates"])) for s in gate["segments"] if s["failed_gates"]}
    assert failing == {("mid", ("kill_rate",))}
