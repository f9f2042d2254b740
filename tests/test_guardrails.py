"""What the post-mortem says costs most (issue 28): app kills (kill_rate), a hold-back split that is what the
rollout says it is (the assignment check, pipeline/gate/assignment.py) and lost users (retention).

Rows go straight into a real DuckDB file, as in tests/test_gate.py; the CLI runs as users run it."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import run_cli
from test_gate import AS_OF, CONFIG, START, gate, load

from pipeline.common.config import load_config
from pipeline.common.registry import CLOUD_COMPARISONS
from pipeline.common.units import percent
from pipeline.common.vocabulary import Status, Verdict
from pipeline.gate import stats
from pipeline.planning.simulate import SOCS, Population, generate


def with_assignment(config=CONFIG, **changes):
    """The config with these assignment settings; the split declared at 20 % (the simulator's) unless given."""
    changes.setdefault("holdback_share", 0.2)
    return dataclasses.replace(config, assignment=dataclasses.replace(config.assignment, **changes))


DECLARED = with_assignment()  # the shipped config declares no share (assignment.py: nothing asserted undeclared)


# ---------------------------------------------------------------- the SRM test's primitive


def test_srm_p_value_is_one_over_the_mean_dirichlet_multinomial_bayes_factor():
    # concentration 2: the priors Dirichlet(1, 1) and three times Dirichlet(0.5, 0.5) (the floor c = 1)
    # 3 and 1 units, 50/50 declared: BF B(4, 2) / B(1, 1) / (1/16) = 0.8 and (1/24)(0.5 1.5 2.5)(0.5) x 16 = 0.625
    assert stats.srm_p_value((3, 1), (0.5, 0.5), 2.0) == 1.0
    # 10 and 0: BF 1024 / 11 and 1024 x (0.5 x 1.5 x ... x 9.5) / 10!
    bf_half = 1024 * math.prod(k + 0.5 for k in range(10)) / math.factorial(10)
    assert stats.srm_p_value((10, 0), (0.5, 0.5), 2.0) == pytest.approx(4 / (1024 / 11 + 3 * bf_half), rel=1e-12)
    # uneven shares: Dirichlet(1.6, 0.4) and (0.8, 0.2) over 80/20, both units on the first arm:
    # marginals 1.6 x 2.6 / (2 x 3) and 0.8 x 1.8 / 2, null 0.64
    bf = (1.6 * 2.6 / 6 + 3 * 0.8 * 1.8 / 2) / 4 / 0.64
    assert stats.srm_p_value((2, 0), (0.8, 0.2), 2.0) == pytest.approx(1 / bf, rel=1e-12)
    assert math.isnan(stats.srm_p_value((5, 5), (1.0, 0.0), 10.0))  # one arm: nothing to test
    assert math.isnan(stats.srm_p_value((0, 0), (0.2, 0.8), 10.0))


def test_kill_rates_sequential_test_weighs_rates_up_to_three_times_its_ceiling():
    from scipy import integrate
    from scipy.stats import binom

    k, n = 30, 1000  # 3 % of 1,000 device-days against a 1 % ceiling
    mixture = integrate.quad(lambda p: binom.pmf(k, n, p), 0.01, 0.03, epsabs=0, epsrel=1e-10)[0] / 0.02
    assert stats.rate_p_value(k, n, 0.01, True, True, relative_width=2.0) == pytest.approx(
        binom.pmf(k, n, 0.01) / mixture, rel=1e-6)
    # the default prior spreads over 20 points: the same data weigh less
    assert stats.rate_p_value(k, n, 0.01, True, True) > 4 * stats.rate_p_value(k, n, 0.01, True, True, 2.0)
    assert stats.mixture_width(0.9, False, 2.0) == pytest.approx(0.2)  # a floor's room is below it


def test_srm_concentration_spreads_the_share_twice_the_smallest_deviation_worth_flagging():
    c = stats.srm_concentration(0.2, 0.001)
    assert c == pytest.approx(0.16 / 0.002**2 - 1)
    assert math.sqrt(0.2 * 0.8 / (c + 1)) == pytest.approx(0.002)


def test_srm_p_value_is_anytime_valid_under_the_declared_split():
    """Draw 400 A/A sequences of 20,000 units at 20 % and look after every 500: the share of sequences ever
    at p <= 0.01 stays under 0.01 (Ville), where a chi-squared test at every look would exceed it."""
    import numpy as np

    rng = np.random.default_rng(7)
    c = stats.srm_concentration(0.2, 0.001)
    ever = 0
    for _ in range(400):
        cloud = np.cumsum(rng.random(20_000) < 0.2)[499::500]
        looks = np.arange(500, 20_001, 500)
        ever += any(stats.srm_p_value((k, n - k), (0.2, 0.8), c) <= 0.01 for k, n in zip(cloud, looks, strict=True))
    assert ever / 400 <= 0.01


# ---------------------------------------------------------------- the assignment check in the gate


@pytest.fixture(scope="module")
def healthy_db(tmp_path_factory):
    return load(tmp_path_factory.mktemp("srm") / "t.duckdb",
                generate("4.12", 40_000, "healthy", seed=3, start=START, days=7))


def test_a_split_as_declared_passes_and_the_comparisons_are_believed(healthy_db):
    result = gate(healthy_db, config=DECLARED)
    split = result.assignment
    assert split.status == Status.PASS and split.unit == "request" and split.expected == 0.2
    release = split.scopes[0]
    assert release.scope == "release" and not release.flagged and abs(release.found - 0.2) < 0.01
    assert [s.scope for s in split.scopes[1:]] == [f"{t}/{r}" for t in ("intent", "rewrite", "summarize")
                                                   for r in ("flagship", "high", "low", "mid")]
    assert all(s.alpha == pytest.approx(0.001 / 12) for s in split.scopes[1:])
    assert set(split.breakdown) == {"app_version", "os_version", "soc"}
    assert result.verdict == Verdict.KEEP_EDGE


@pytest.mark.parametrize("action, verdict, status", [("hold", Verdict.INSUFFICIENT_DATA, Status.INSUFFICIENT_DATA),
                                                     ("rollback", Verdict.ROLLBACK_TO_CLOUD, Status.FAIL),
                                                     ("warn", Verdict.KEEP_EDGE, Status.PASS)])
def test_a_split_off_the_declared_one_holds_fails_or_warns_the_comparisons(healthy_db, action, verdict, status):
    result = gate(healthy_db, config=with_assignment(holdback_share=0.25, action=action))
    release = result.assignment.scopes[0]
    assert release.flagged and release.p_value < 1e-6
    assert (release.cloud, release.edge) == (7664, 30686)
    assert release.reason == "hold-back 19.98% of 38,350 online requests, 25.00% declared (p < 0.001, alpha 0.1%)"
    assert result.verdict == verdict
    quality = result.release_wide["quality_loss"]
    assert quality.status == status and "the hold-back split is not the declared one (release: " in quality.note
    # the gates that do not compare with the cloud are untouched
    base = gate(healthy_db, config=DECLARED)
    others = [g for g in base.segments[0].checks if g not in CLOUD_COMPARISONS]
    assert [[s.checks[g].status for g in others] for s in result.segments] == \
        [[s.checks[g].status for g in others] for s in base.segments]


def test_a_small_deviation_is_not_flagged_however_many_units(healthy_db):
    found = gate(healthy_db).assignment.scopes[0].found
    result = gate(healthy_db, config=with_assignment(holdback_share=round(found + 0.002, 4), min_deviation=0.01))
    assert not result.assignment.scopes[0].flagged


def test_devices_on_both_arms_are_a_leak_when_devices_are_assigned(healthy_db):
    # the simulator assigns requests: every active device is on both arms
    result = gate(healthy_db, config=with_assignment(unit="device"))
    release = result.assignment.scopes[0]
    assert release.flagged and (release.cloud, release.edge, release.both_arms) == (4, 196, 1795)
    assert release.reason.endswith("; 1,795 of 1,995 devices on both arms (89.97%, at most 0.10% allowed)")


def test_a_device_level_hold_back_as_declared_passes(tmp_path):
    pop = Population(holdback_share=0.2, devices=3000)
    path = load(tmp_path / "d.duckdb", generate("4.12", 40_000, "healthy", seed=5, start=START, days=7,
                                                population=pop))
    result = gate(path, config=with_assignment(unit="device"))
    release = result.assignment.scopes[0]
    assert result.assignment.status == Status.PASS, release.reason
    assert release.both_arms == 0 and abs(release.found - 0.2) < 0.03


def test_the_cli_takes_a_per_release_hold_back_share_and_exits_3_on_hold(healthy_db):
    args = ("gate", "--release", "4.12", "--db", str(healthy_db), "--as-of", AS_OF.isoformat(), "--dry-run")
    done = run_cli(*args, "--holdback-share", "0.25", "--json")
    assert done.returncode == 3, done.stderr
    out = json.loads(done.stdout)
    assert out["assignment"]["declared_by"] == "--holdback-share"
    assert out["assignment"]["expected_holdback_share"] == 0.25 and out["assignment"]["status"] == "fail"
    assert out["note"].endswith("the hold-back split is not the declared one (assignment.action: hold)")
    assert run_cli(*args, "--holdback-share", "0.2").returncode == 0
    bad = run_cli(*args, "--holdback-share", "1.5")
    assert bad.returncode == 2 and "not a share: '1.5' (a number from 0 to 1)" in bad.stderr


# ---------------------------------------------------------------- scenarios of the simulator


def window_of_14_days(rows: int, scenario: str = "healthy", **kwargs):
    return generate("4.12", rows, scenario, seed=11, start=AS_OF - timedelta(days=14), days=14, **kwargs)


@pytest.fixture(scope="module")
def kills_db(tmp_path_factory):
    return load(tmp_path_factory.mktemp("kills") / "k.duckdb", window_of_14_days(120_000, "low_tier_kills"))


def test_a_low_tier_killed_on_3_percent_of_device_days_rolls_back_every_segment_of_that_tier_only(kills_db):
    """kill_rate is judged over the device tier (a kill is the device's): each of the nine low-tier segments
    reads the tier's device-days, is one hypothesis with the others, and fails; no other tier does, and the
    verdict names the tier. (Judged per segment, 2 of 9 failed: each segment saw a fraction of the kills.)"""
    result = gate(kills_db)
    low = {s.key: s.checks["kill_rate"] for s in result.segments if s.device_tier == "low"}
    assert len(low) == 9 and len({c.measured for c in low.values()}) == 1
    assert 0.03 < next(iter(low.values())).measured < 0.05
    assert {c.note.split("; ")[-1] for c in low.values()} == {
        f"judged over the low tier: {next(iter(low.values())).rows:,} edge device-days of "
        f"{next(iter(low.values())).devices:,} devices, every task and network"}
    rolled = {s.key: s.failed_gates for s in result.segments if s.failed_gates}
    assert rolled == {k: ["kill_rate"] for k in low}
    assert result.verdict == Verdict.PARTIAL_ROLLBACK
    assert result.note == ("9 of 34 judged segments roll back; kill rate fails on the low tier "
                           f"({percent(next(iter(low.values())).measured)}, <= 1%)")
    release = result.release_wide["kill_rate"]
    assert release.status == Status.PASS and 0.01 < release.measured < 0.013  # past 1 %, not significantly
    assert set(release.extra["error_device_days"]) >= {"OOM", "LMK_KILLED"}
    assert release.extra["kill_codes"] == ["OOM", "LMK_KILLED"]


def test_a_task_with_its_own_kill_ceiling_is_its_own_hypothesis(kills_db):
    """Segments of a tier share its figure; one whose task sets another ceiling (task_overrides) is tested against
    that ceiling, not folded into the others' hypothesis."""
    loose = dataclasses.replace(CONFIG.gates, kill_rate=dataclasses.replace(CONFIG.gates.kill_rate, max_share=0.2))
    result = gate(kills_db, config=dataclasses.replace(CONFIG, task_overrides={**(CONFIG.task_overrides or {}),
                                                                               "summarize": loose}))
    low = {s.key: s.checks["kill_rate"] for s in result.segments if s.device_tier == "low"}
    assert {k: c.status for k, c in low.items() if k.startswith("summarize/")} == {
        f"summarize/low/{b}": Status.PASS for b in ("normal", "weak", "offline")}
    assert all(c.status == Status.FAIL for k, c in low.items() if not k.startswith("summarize/"))


def test_a_healthy_release_passes_kill_rate_everywhere(tmp_path):
    result = gate(load(tmp_path / "h.duckdb", window_of_14_days(120_000)))
    assert {s.checks["kill_rate"].status for s in result.segments} <= {Status.PASS, Status.INSUFFICIENT_DATA}
    assert result.release_wide["kill_rate"].measured < 0.004 and result.verdict == Verdict.KEEP_EDGE


def test_kill_codes_decide_what_counts_as_a_kill(kills_db):
    config = dataclasses.replace(CONFIG, gates=dataclasses.replace(
        CONFIG.gates, kill_rate=dataclasses.replace(CONFIG.gates.kill_rate, kill_codes=("MODEL_LOAD_FAILED",))))
    result = gate(kills_db, config=config)
    release = result.release_wide["kill_rate"]
    assert release.measured == pytest.approx(release.extra["error_device_days"]["MODEL_LOAD_FAILED"]["share"])
    assert not any("kill_rate" in s.failed_gates for s in result.segments)


DEVICE_HOLDBACK = Population(holdback_share=0.2, devices=6000)
BY_DEVICE = with_assignment(unit="device")


@pytest.mark.parametrize("churn, status", [(0.0, Status.PASS), (0.3, Status.FAIL)])
def test_retention_compares_the_devices_coming_back_on_each_arm(tmp_path, churn, status):
    path = load(tmp_path / "r.duckdb", window_of_14_days(100_000, population=DEVICE_HOLDBACK, edge_churn=churn))
    result = gate(path, config=BY_DEVICE)
    release = result.release_wide["retention"]
    assert release.status == status and release.mode == "observe"
    assert release.extra["cloud_return"] > 0.9 and release.devices > 4000
    assert (release.measured > 0.2) == (churn > 0)
    assert result.verdict == Verdict.KEEP_EDGE  # observed, never blocks
    assert gate(path).release_wide["retention"].status == Status.NOT_APPLICABLE  # requests assigned: no arm


def test_telemetry_lost_from_the_edge_arms_worst_devices_is_a_mismatch_that_names_them(tmp_path):
    path = load(tmp_path / "l.duckdb", window_of_14_days(100_000, population=DEVICE_HOLDBACK,
                                                         edge_device_loss=0.3))
    result = gate(path, config=BY_DEVICE)
    release = result.assignment.scopes[0]
    assert release.flagged and release.found > 0.25
    worst = [cell["value"] for cell in result.assignment.breakdown["soc"][:3]]
    assert set(worst) <= set(SOCS["low"]) and all(c["off"] for c in result.assignment.breakdown["soc"][:3])
    assert result.verdict == Verdict.INSUFFICIENT_DATA
    assert result.release_wide["quality_loss"].status == Status.INSUFFICIENT_DATA


def test_an_undeclared_split_asserts_nothing_and_still_catches_edge_devices_lost(tmp_path):
    """A team holding back half its devices and declaring nothing (the shipped config declares no share): the
    split is reported, not held to a share nobody declared, and the verdicts are those of the share declared;
    telemetry lost from the edge arm's worst devices moves the tiers that lose it off the release's own share,
    and the comparisons are held as when the share is declared. The old default (20 % asserted) held both."""
    undeclared = dataclasses.replace(BY_DEVICE, assignment=dataclasses.replace(BY_DEVICE.assignment,
                                                                               holdback_share=None))
    half = Population(holdback_share=0.5, devices=6000)
    for loss, verdict in ((0.0, Verdict.KEEP_EDGE), (0.3, Verdict.INSUFFICIENT_DATA)):
        path = load(tmp_path / f"half-{loss}.duckdb", window_of_14_days(100_000, population=half,
                                                                        edge_device_loss=loss))
        result = gate(path, config=undeclared)
        declared = gate(path, config=with_assignment(unit="device", holdback_share=0.5))
        assert (result.verdict, declared.verdict) == (verdict, verdict)
        assert result.assignment.expected is None and result.assignment.declared_by == ""
        release = result.assignment.scopes[0]
        assert release.p_value is None and release.reason.startswith(
            f"hold-back {release.found:.2%} of {release.cloud + release.edge:,} devices, none declared "
            "(assignment.holdback_share); each task x tier held to it")
        flagged = [s.scope for s in result.assignment.scopes if s.flagged]
        if loss:
            assert "release" in flagged and {"intent/low", "rewrite/low", "summarize/low"} <= set(flagged)
            assert "task x tier hold back another share: " in release.reason
        else:
            assert flagged == []
            assert gate(path, config=BY_DEVICE).verdict == Verdict.INSUFFICIENT_DATA  # 20 % asserted: held


def test_a_misconfigured_request_split_is_flagged(tmp_path):
    path = load(tmp_path / "m.duckdb", window_of_14_days(60_000, population=Population(request_holdback=0.25)))
    release = gate(path, config=DECLARED).assignment.scopes[0]
    assert release.flagged and 0.24 < release.found < 0.26


def test_the_ledger_prices_the_retention_drop_of_the_edge_arm(tmp_path):
    from pipeline.planning.ledger import compute_ledger
    from pipeline.warehouse import db
    from pipeline.warehouse.aggregate import use_settings

    path = load(tmp_path / "c.duckdb", window_of_14_days(100_000, population=DEVICE_HOLDBACK, edge_churn=0.3))
    config = dataclasses.replace(BY_DEVICE, costs=dataclasses.replace(BY_DEVICE.costs, lost_user_value=25.0,
                                                                      currency="USD"))
    check = gate(path, config=config).release_wide["retention"]
    with db.reading(path) as con:
        use_settings(con, config)
        totals = compute_ledger(con, "4.12", config, as_of=AS_OF).totals
        requests = compute_ledger(con, "4.12", CONFIG, as_of=AS_OF).totals
    lost = totals["lost_users"]
    edge_devices = round(lost.value / check.measured)
    assert lost.value == pytest.approx(check.measured * edge_devices) and 4000 < edge_devices < 5000
    assert lost.basis == (f"(cloud {check.extra['cloud_return']:.1%} - edge {check.extra['edge_return']:.1%} of "
                          f"devices returning after 7 days, 0 if below) x {edge_devices:,} edge devices")
    assert totals["retention_cost"].value == pytest.approx(25 * lost.value)
    assert requests["lost_users"].value is None
    assert requests["lost_users"].basis == "not measured: needs a device-level hold-back (assignment.unit: device)"


def test_the_whole_release_rolls_back_when_the_edge_traffic_it_keeps_still_kills(tmp_path):
    """One day of low_tier_memory: its low-tier normal segments roll back, but the low tier's small segments lack
    the rows to be judged and stay on the edge with their kills: the traffic kept is past the ceiling."""
    text = Path(CONFIG.source).read_text().replace("window_days: 14 ", "window_days: 1  ")
    (tmp_path / "one-day.yaml").write_text(text)
    config = load_config(tmp_path / "one-day.yaml")
    path = load(tmp_path / "d.duckdb", generate("4.12", 12_000, "low_tier_memory", seed=50,
                                                 start=datetime(2026, 11, 10), days=1))
    result = gate(path, config=config, as_of=datetime(2026, 11, 11))
    kills = result.release_wide["kill_rate"]
    assert kills.status == Status.FAIL and result.verdict == Verdict.ROLLBACK_TO_CLOUD
    assert kills.extra["kept_traffic"]["segments_rolled_back"] == 3
    assert kills.note == ("the edge traffic kept without the 3 segments rolled back still has a kill on 7.68% of "
                          "its device-days (p = 1e-15)")


def test_units_on_an_arm_declared_at_zero_are_a_leak(healthy_db):
    release = gate(healthy_db, config=with_assignment(holdback_share=0.0)).assignment.scopes[0]
    assert release.flagged and release.p_value is None  # one arm: nothing for the test, all for the leak check
    assert release.reason.endswith(f"; {release.cloud:,} online requests on the cloud, declared at 0 %")
    assert release.reason.startswith("hold-back 19.98% of 38,350 online requests, 0.00% declared (not tested")
