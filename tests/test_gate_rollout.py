"""The gate over a whole rollout (issue 12): simulated releases judged on each of 14 nights with the
default policy, through evaluate_gate and the rollout state machine (pipeline/planning/backtest.py, the same
code as `pipeline backtest --simulated`).

The fast sweeps run a few seeds at the sizes of the acceptance; `-m slow` runs 100 seeds each and
asserts the rates docs/operating-characteristics.md states (measured by `pipeline backtest --simulated --runs 100`).
"""

from __future__ import annotations

import os

import pytest

from pipeline.common.config import load_config
from pipeline.planning.backtest import SWEEPS, Sweep, merge, run_sweep

CONFIG = load_config()
FAST_SEEDS = int(os.environ.get("ROLLOUT_SWEEP_SEEDS", "2"))
BY_NAME = {s.name: s for s in SWEEPS}


def sweep(name: str, seeds: int, **change) -> object:
    s = BY_NAME[name]
    if change:
        s = Sweep(**{**s.__dict__, **change})
    return merge([run_sweep(s, seed, CONFIG) for seed in range(seeds)])  # in this worker: xdist keeps both cores busy


def test_device_clustered_aa_keeps_the_edge_on_every_night():
    r = sweep("A/A, device-clustered", FAST_SEEDS, rows=56_000)
    assert (r.runs, r.ever) == (FAST_SEEDS, 0)


def test_a_loss_at_the_tolerance_is_not_rolled_back_on_any_night():
    r = sweep("adoption loss at the tolerance (3 %)", FAST_SEEDS, rows=56_000)
    assert (r.runs, r.ever) == (FAST_SEEDS, 0)


def test_a_15_percent_loss_at_400_rows_per_segment_is_rolled_back():
    r = sweep("adoption loss 15 %, ~400 rows/segment", FAST_SEEDS)
    assert r.ever == FAST_SEEDS and 350 <= min(r.median_rows) <= 500


def test_p95_at_the_budget_never_fails_and_at_1_2x_nearly_always():
    at = sweep("latency p95 at the budget, independent values", 1, rows=35_000)
    over = sweep("latency p95 at 1.2 x the budget, independent values", 1, rows=35_000)
    assert at.looks > 100 and at.looks_failed == 0
    assert over.looks > 100 and over.looks_failed / over.looks >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("name,most,least", [
    ("A/A, independent rows", 0.01, None),
    ("A/A, device-clustered", 0.01, None),                    # acceptance: >= 95 of 100 keep; A/A <= 1 %
    ("adoption loss at the tolerance (3 %)", 0.05, None),     # <= 5 % over 14 nights
    ("adoption loss 10 %, ~1,000 rows/segment", None, 0.95),  # >= 95 % by night 14
    ("adoption loss 15 %, ~400 rows/segment", None, 0.95),
])
def test_operating_characteristics_over_100_seeds(name, most, least):
    r = sweep(name, 100)
    rate = r.ever / r.runs
    assert (most is None or rate <= most) and (least is None or rate >= least), (name, r.ever, r.runs)


@pytest.mark.slow
@pytest.mark.parametrize("name,most,least", [
    ("latency p95 at the budget, independent values", 0.05, None),
    ("latency p95 at 1.2 x the budget, independent values", None, 0.90),
    ("latency p95 at the budget, device-clustered", 0.05, None),
    # correlated values carry less evidence: measured 81 % (docs/operating-characteristics.md), short of the 90 % met
    # on independent ones
    ("latency p95 at 1.2 x the budget, device-clustered", None, 0.75),
])
def test_p95_budget_looks_over_100_seeds(name, most, least):
    r = sweep(name, 100)
    rate = r.near_500_failed / r.near_500  # looks of segments with 400-700 values
    assert (most is None or rate <= most) and (least is None or rate >= least), (name, r.near_500_failed, r.near_500)
