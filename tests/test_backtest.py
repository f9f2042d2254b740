"""`pipeline backtest`: the gate replayed night by night over stored telemetry, on the demo data
(4.11 healthy, 4.12 the post-mortem), through the real CLI and through backtest() itself."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pyarrow.compute as pc
import pytest
from conftest import DEMO_AS_OF, run_cli
from test_output_schema import _validator

from pipeline.common.config import load_config
from pipeline.planning.backtest import _aa_cloud, _aa_edge, backtest, load_scratch, parse_injection, replay_nights
from pipeline.planning.simulate import CLUSTERED, generate
from pipeline.warehouse import db

CONFIG = load_config()
AS_OF = datetime.fromisoformat(DEMO_AS_OF)


def cli(demo_dir, *args: str):
    return run_cli("backtest", "--db", str(demo_dir / "telemetry.duckdb"), *args)


def test_backtest_of_a_healthy_release_has_no_false_rollback_and_catches_each_injection(demo_dir):
    proc = cli(demo_dir, "--release", "4.11", "--as-of", DEMO_AS_OF, "--runs", "1", "--nights", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    _validator("backtest").validate(out)
    assert out["looks"] == ["2026-11-29", "2026-11-30", "2026-12-01"]
    by = {v["variant"]: v for v in out["variants"]}
    assert [v["kind"] for v in out["variants"]] == ["stored", "aa", "aa", "inject", "inject", "inject", "inject"]
    for name in ("as stored", "A/A, cloud devices split", "A/A, edge devices split"):
        assert (by[name]["runs"], by[name]["rolled_back"]) == (1, 0), name
    caught = {v["gate"]: v["caught"] for v in out["variants"] if v["kind"] == "inject"}
    assert caught == {"quality_loss": 1, "inference_duration": 1, "peak_memory": 1, "fallback_rate": 1}


def test_backtest_text_names_the_policy_and_every_variant(demo_dir):
    proc = cli(demo_dir, "--release", "4.12", "--as-of", DEMO_AS_OF, "--runs", "1", "--nights", "2",
               "--inject", "adoption=0.2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("backtest 4.12: 1 runs x 2 nightly looks (2026-11-30 .. 2026-12-01), seed 0; statistics "
                        "sequential, estimand per_device, alpha 0.05 per evaluation; rollout: roll back at 1 "
                        "failing of the last 1 looks")
    stored = next(ln for ln in lines if ln.startswith("as stored"))
    assert "1 of 1 (100%)" in stored  # the post-mortem release is rolled back as stored
    assert any(ln.startswith("adoption -20% relative (quality_loss)") for ln in lines)


@pytest.mark.parametrize("args,message", [
    (("--release", "4.11", "--inject", "speed=0.1"),
     "pipeline backtest: error: --inject 'speed=0.1': unknown regression 'speed'; known: adoption, latency, "
     "memory, fallback (e.g. --inject adoption=0.1)\n"),
    (("--release", "4.11", "--inject", "adoption=abc"),
     "pipeline backtest: error: --inject 'adoption=abc': the size must be a number, e.g. adoption=0.1\n"),
    (("--release", "4.11", "--inject", "adoption=1.5"),
     "pipeline backtest: error: --inject 'adoption=1.5': the size must be > 0 and < 1\n"),
    (("--release", "4.11", "--runs", "0"),
     "pipeline backtest: error: --runs, --nights, --segment-rows and --jobs must be >= 1\n"),
    (("--simulated", "--release", "4.11"),
     "pipeline backtest: error: --simulated judges simulated releases: leave out --release\n"),
    ((), "pipeline backtest: error: backtest needs --release R (or --simulated)\n"),
])
def test_backtest_usage_errors_are_one_line_and_exit_2(demo_dir, args, message):
    proc = cli(demo_dir, *args)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", message)


def test_an_unknown_release_names_the_ones_present(demo_dir):
    proc = cli(demo_dir, "--release", "4.99")
    assert proc.returncode == 2
    assert "no release '4.99' in the database; releases present: 4.11, 4.12" in proc.stderr


def test_splits_keep_devices_whole():
    table = generate("4.12", 20_000, "healthy", seed=3, population=CLUSTERED)
    rng = np.random.default_rng(1)
    for split in (_aa_cloud, _aa_edge):
        t = split(table, rng)
        routes_per_device: dict[str, set[str]] = {}
        for device, route in zip(t["device_id"].to_pylist(), t["route"].to_pylist(), strict=True):
            routes_per_device.setdefault(device, set()).add("cloud" if route == "cloud" else "edge")
        assert all(len(r) == 1 for r in routes_per_device.values())
        halves = [sum(r == {"cloud"} for r in routes_per_device.values()), sum(r == {"edge"} for r in
                                                                                 routes_per_device.values())]
        assert min(halves) > 0.4 * sum(halves)


def test_injections_do_what_they_say():
    table = generate("4.12", 60_000, "healthy", seed=4, start=datetime(2026, 11, 20), days=7)
    edge = pc.not_equal(table["route"], "cloud")
    adopted = lambda t: pc.sum(pc.and_(edge, pc.equal(t["outcome"], "adopted"))).as_py()  # noqa: E731
    lost = parse_injection("adoption=0.2").apply(table, np.random.default_rng(0), 0.2)
    assert adopted(lost) / adopted(table) == pytest.approx(0.8, abs=0.01)

    scaled = load_scratch(table.append_column("file_id", pc.cast(pc.multiply(pc.cast(edge, "int32"), 0), "int32")),
                          CONFIG)
    from pipeline.planning.backtest import _budgets
    from pipeline.warehouse import sqlfiles

    sqlfiles.run(scaled, "backtest/scale_to_budget", {"factor": 1.2, "figure": "total", **_budgets(CONFIG)})
    ratios = scaled.execute("""
        SELECT task, quantile_cont(total_ms, 0.95) / CASE WHEN task = 'intent' THEN 2000 ELSE 10000 END
        FROM events_enriched WHERE on_device GROUP BY task, device_tier, network_bucket""").fetchall()
    assert all(r == pytest.approx(1.2, rel=1e-6) for _, r in ratios)


def test_the_clustered_regressions_move_their_figure_by_the_size_asked_and_cluster_by_device():
    from pipeline.planning.backtest import _fallback_spike, _silent_failures
    from pipeline.planning.simulate import Population

    table = generate("4.12", 60_000, "aa", seed=5, start=datetime(2026, 11, 20), days=7,
                     population=Population(devices=2000, adoption_concentration=2, activity_pareto=1.3))
    edge = np.asarray(pc.not_equal(table["route"], "cloud"))
    devices = np.asarray(table["device_id"].to_pylist())
    outcome = lambda t: np.asarray(t["outcome"].to_pylist())  # noqa: E731
    detected = lambda t: np.asarray(t["auto_fallback"]) | np.asarray(pc.is_valid(t["error_code"]))  # noqa: E731

    def fallback(t):
        return np.isin(outcome(t), ["edited", "regenerated", "undone"]) | np.asarray(t["auto_fallback"])

    def by_device(hit, of, least=1):
        """Each device's share of `of` rows that are `hit`, for devices with at least `least` such rows."""
        shares = [hit[of & (devices == d)].mean() for d in np.unique(devices[of])]
        return np.array([x for x, d in zip(shares, np.unique(devices[of]), strict=True)
                         if (of & (devices == d)).sum() >= least])

    # the average device gets the size asked; a few very active devices move the share of rows more or less
    spiked = _fallback_spike(table, np.random.default_rng(1), 0.10, concentration=2)
    added = fallback(spiked) & ~fallback(table)
    assert by_device(added, edge & ~fallback(table)).mean() == pytest.approx(0.10 / (1 - 0.02), abs=0.01)
    assert fallback(spiked)[edge].mean() - fallback(table)[edge].mean() == pytest.approx(0.10, abs=0.02)
    # by device: the share varies between devices far beyond binomial noise
    assert np.std(by_device(added, edge, least=20)) > 2 * np.sqrt(0.1 * 0.9 / 20)

    silent = _silent_failures(table, np.random.default_rng(2), 0.20, concentration=2)
    before, after = detected(table) & edge, detected(silent) & edge
    assert by_device(before & ~after, before).mean() == pytest.approx(0.20, abs=0.03)
    assert (outcome(silent)[before & ~after] == "failed").all()  # still failures, now undetected


def test_replay_advances_the_rollout_state_each_night():
    table = generate("4.12", 30_000, "postmortem", seed=5, start=datetime(2026, 11, 1), days=5)
    con = load_scratch(table.append_column("file_id", pc.cast(pc.multiply(pc.cast(pc.is_valid(table["task"]),
                                                                                 "int32"), 0), "int32")), CONFIG)
    looks = replay_nights(con, "4.12", CONFIG, datetime(2026, 11, 2), 4)
    assert [look.night for look in looks] == [1, 2, 3, 4]
    assert all(look.rolled for look in looks) and "quality_loss" in looks[-1].rolled_gates


def test_segment_rows_subsamples_devices_to_the_size_asked(tmp_path):
    path = tmp_path / "t.duckdb"
    table = generate("4.12", 50_000, "healthy", seed=6, start=datetime(2026, 11, 20), days=7)
    with db.writing(path) as con:
        con.register("t", table)
        con.execute("INSERT INTO events BY NAME SELECT *, 0 AS file_id FROM t")
    with db.reading(path) as con:
        result = backtest(con, "4.12", CONFIG, datetime(2026, 11, 27), nights=1, runs=1, segment_rows=300,
                          injections=[])
    rows = result.variants[0].median_rows[0]
    assert 200 <= rows <= 400, rows
