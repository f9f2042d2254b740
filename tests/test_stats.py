"""pipeline/gate/stats.py against known values: closed forms, published figures and independent
computations (numerical integration with numpy, direct sums), edge cases n = 0, 1 and k = n,
and the operating characteristics of the tests on their own (size at the threshold, over looks)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pipeline.gate import stats as S


def test_wilson_matches_published_values_and_edges():
    # Newcombe (1998), Table I: 0/10 -> 0 to 0.2775; 10/10 -> 0.7225 to 1; 81/263 -> 0.2553 to 0.3662
    assert S.wilson(0, 10, 0.95) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert S.wilson(10, 10, 0.95) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert S.wilson(81, 263, 0.95) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert S.wilson(0, 0, 0.95) is None


@pytest.mark.parametrize("a,b,x,expected", [
    (1, 1, 0.3, 0.3),                       # I_x(1, 1) = x
    (3, 1, 0.4, 0.4**3),                    # I_x(a, 1) = x^a
    (1, 4, 0.2, 1 - 0.8**4),                # I_x(1, b) = 1 - (1 - x)^b
    (7, 7, 0.5, 0.5),                       # symmetry
    (2.5, 2.5, 0.5, 0.5),
])
def test_incomplete_beta_closed_forms(a, b, x, expected):
    assert S.betainc(a, b, x) == pytest.approx(expected, rel=1e-12)


def test_binomial_tails_exact():
    assert S.binom_sf(8, 10, 0.5) == pytest.approx(56 / 1024, rel=1e-12)  # C(10,8)+C(10,9)+C(10,10)
    assert S.binom_cdf(0, 20, 0.05) == pytest.approx(0.95**20, rel=1e-12)
    assert S.binom_cdf(2, 5, 0.3) == pytest.approx(sum(math.comb(5, i) * 0.3**i * 0.7 ** (5 - i) for i in range(3)))
    assert S.binom_sf(0, 5, 0.3) == 1.0 and S.binom_sf(6, 5, 0.3) == 0.0
    assert S.binom_cdf(5, 5, 0.3) == 1.0 and S.binom_cdf(-1, 5, 0.3) == 0.0


def test_device_ratio_equals_the_per_device_formula():
    rng = np.random.default_rng(3)
    n = rng.integers(1, 40, 200)
    k = rng.binomial(n, rng.beta(2, 2, 200))
    r = S.device_ratio(200, n.sum(), k.sum(), (n * n).sum(), (k * k).sum(), (k * n).sum())
    p = k.sum() / n.sum()
    direct = 200 / 199 * ((k - p * n) ** 2).sum() / n.sum() ** 2
    assert r.rate == pytest.approx(p) and r.variance == pytest.approx(direct, rel=1e-12)
    assert r.design_effect > 2  # heterogeneous devices: rows are worth much less than independent draws


def test_device_ratio_of_independent_rows_has_design_effect_near_one():
    rng = np.random.default_rng(4)
    k = rng.binomial(1, 0.3, 20_000)  # one row per device: the binomial case
    r = S.device_ratio(20_000, 20_000, k.sum(), 20_000, (k * k).sum(), k.sum())
    assert r.design_effect == pytest.approx(1.0, abs=0.03)


def test_device_ratio_edge_cases():
    assert math.isnan(S.device_ratio(0, 0, 0, 0, 0, 0).rate)
    one = S.device_ratio(1, 10, 3, 100, 9, 30)  # one device: no variance to estimate, so the worst case
    assert math.isinf(one.variance) and one.design_effect == 10.0 and one.n_eff == 1.0
    few = S.device_ratio(3, 30, 6, 400, 20, 110, min_devices=20)  # below min_devices: at least sum n_i^2 / sum n_i
    assert few.design_effect >= 400 / 30
    none = S.device_ratio(5, 50, 0, 500, 0, 0)  # 0 successes: binomial variance 0, design effect 1
    assert none.rate == 0 and none.design_effect == 1.0
    all_ = S.device_ratio(5, 50, 50, 500, 500, 500)
    assert all_.rate == 1 and all_.design_effect == 1.0


def _mixture_by_integration(k: float, n: float, p0: float, above: bool) -> float:
    ps = np.linspace(p0, min(1, p0 + 0.2), 400_001) if above else np.linspace(max(0, p0 - 0.2), p0, 400_001)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_lr = (np.where(k > 0, k * np.log(ps / p0), 0.0)
                  + np.where(n - k > 0, (n - k) * np.log((1 - ps) / (1 - p0)), 0.0))
    return float(np.trapezoid(np.exp(log_lr), ps) / (ps[-1] - ps[0]))


@pytest.mark.parametrize("k,n,p0,above", [(40, 500, 0.05, True), (60, 500, 0.05, True), (40, 100, 0.25, True),
                                          (80, 100, 0.9, False), (0, 90, 0.05, False), (12.5, 100.3, 0.05, True)])
def test_mixture_likelihood_ratio_equals_numerical_integration(k, n, p0, above):
    p = S.rate_p_value(k, n, p0, above, sequential=True)
    assert 1 / p == pytest.approx(_mixture_by_integration(k, n, p0, above), rel=1e-6)


def test_rate_p_values_edge_cases():
    assert math.isnan(S.rate_p_value(0, 0, 0.05, True, True))
    assert S.rate_p_value(0, 1, 0.05, True, True) == 1.0  # nothing above: no evidence of harm
    assert S.rate_p_value(1, 1, 0.05, True, False) == pytest.approx(0.05)  # exact: P(X >= 1 | n=1, p=.05)
    assert S.rate_p_value(10, 10, 0.5, True, False) == pytest.approx(0.5**10)
    # data far outside the prior's range: the mass underflows unless computed in logs (87 % above a p95 budget)
    assert S.rate_p_value(976, 1124, 0.05, True, True) < 1e-100


def test_values_needed_for_a_p95_bound():
    # one look, no value above the budget: 0.95^n <= 0.05 from n = 59 (the "59 rule")
    assert S.values_needed(0.05, above=False, alpha=0.05, sequential=False) == 59
    # sequential: the mixture needs more before none above reaches 1/alpha
    assert S.values_needed(0.05, above=False, alpha=0.05, sequential=True) == 88


def test_order_statistic_ranks_are_exact():
    # an upper bound for the p95 at 97.5 % needs 0.95^n <= 0.025: n >= 72
    assert S.order_statistic_ranks(71, 0.95, 0.95)[1] is None
    assert S.order_statistic_ranks(72, 0.95, 0.95)[1] == 72
    lo, hi = S.order_statistic_ranks(1000, 0.95, 0.95)
    assert S.binom_sf(lo, 1000, 0.95) >= 0.975 > S.binom_sf(lo + 1, 1000, 0.95)
    assert S.binom_cdf(hi - 1, 1000, 0.95) >= 0.975 > S.binom_cdf(hi - 2, 1000, 0.95)
    assert S.order_statistic_ranks(0, 0.95, 0.95) == (None, None)
    assert S.order_statistic_ranks(1, 0.95, 0.95) == (None, None)


def test_order_statistic_interval_covers_at_small_n():
    """The old interpolated interval covered the p95 in 19 % of samples at n = 5 and 63 % at n = 20;
    exact ranks on true order statistics cover at least 95 % (where a bound exists, else it is open)."""
    rng = np.random.default_rng(5)
    true = math.exp(1.6449)  # the p95 of a standard lognormal
    fractions = np.array(S.QUANTILE_GRID)
    for n in (5, 20, 100):
        covered = 0
        for _ in range(2000):
            x = np.sort(rng.lognormal(0, 1, n))
            grid = x[np.clip(np.ceil(fractions * n).astype(int) - 1, 0, n - 1)]  # quantile_disc
            lo, hi = S.quantile_interval(grid, n, 0.95, 0.95)
            covered += (lo is None or lo <= true) and (hi is None or true <= hi)
        assert covered / 2000 >= 0.95, n


def test_msprt_equals_numerical_integration_and_is_one_sided():
    for z, r in [(2.0, 10), (3.0, 100), (4.0, 1000)]:
        d = np.linspace(0, 40, 400_001)  # half-normal prior on the effect, variance r, V = 1
        lr = np.exp(z * d - d**2 / 2) * 2 * np.exp(-d**2 / (2 * r)) / math.sqrt(2 * math.pi * r)
        assert 1 / S.msprt_p_value(z, r) == pytest.approx(float(np.trapezoid(lr, d)), rel=1e-6)
    assert S.msprt_p_value(-3.0, 100) == 1.0  # evidence the other way is no evidence
    assert math.isnan(S.z_p_value(1.0, 0.0, 1.0, True))


def test_fm_restricted_mle_maximises_the_constrained_likelihood():
    x1, n1, x2, n2, theta = 780, 1000, 92, 100, 0.97
    p1, p2 = S.fm_restricted(x1, n1, x2, n2, theta)
    grid = np.linspace(0.5, 1 - 1e-9, 200_001)
    ll = x1 * np.log(theta * grid) + (n1 - x1) * np.log1p(-theta * grid) + x2 * np.log(grid) + (n2 - x2) * np.log1p(
        -grid)
    assert p2 == pytest.approx(float(grid[np.argmax(ll)]), abs=1e-5) and p1 == pytest.approx(theta * p2)
    # when the sample sits exactly on the null, the restricted MLE is the sample itself
    assert S.fm_restricted(97, 100, 100, 100, 0.97) == pytest.approx((0.97, 1.0))


def test_score_test_is_not_liberal_on_a_small_baseline():
    """At the tolerance with 100 cloud rows, the one-look score test rejects at most at its level
    (the z test it replaced rejected at 0.019 where Holm's first cut was 0.05 / 13)."""
    rng = np.random.default_rng(6)
    alpha, pc, theta = 0.05 / 13, 0.92, 0.97
    xe, xc = rng.binomial(1000, theta * pc, 20_000), rng.binomial(100, pc, 20_000)
    rejected = 0
    for a, b in zip(xe, xc, strict=True):
        e = S.DeviceRatio(1000, 1000, a, a / 1000 * (1 - a / 1000) / 1000)
        c = S.DeviceRatio(100, 100, b, b / 100 * (1 - b / 100) / 100)
        d, v = S.stratified_ratio_score([S.Stratum(e, c)], theta)
        rejected += S.normal_sf(-d / math.sqrt(v)) <= alpha
    assert rejected / 20_000 <= alpha


def test_mixture_test_keeps_alpha_over_fourteen_looks():
    """Bernoulli rows at the threshold, judged after each of 14 nights: rejected on some night in at most
    alpha of 1,500 rollouts; the one-look exact test, looked at 14 times, in far more."""
    rng = np.random.default_rng(7)
    p0, alpha, per_night = 0.05, 0.05, 60
    ever_seq = ever_fixed = 0
    for _ in range(1500):
        k = np.cumsum(rng.binomial(per_night, p0, 14))
        n = per_night * np.arange(1, 15)
        ever_seq += any(S.rate_p_value(a, b, p0, True, True) <= alpha for a, b in zip(k, n, strict=True))
        ever_fixed += any(S.rate_p_value(a, b, p0, True, False) <= alpha for a, b in zip(k, n, strict=True))
    assert ever_seq / 1500 <= alpha
    assert ever_fixed / 1500 > 2 * alpha


def test_holm_known_example_and_nan_is_never_a_rejection():
    ps = {"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005}
    assert S.holm(ps, 0.05) == {"a", "d"}  # 0.005 <= .0125, 0.01 <= .0167, 0.03 > .025
    assert S.holm({"a": math.nan, "b": 0.04}, 0.05) == {"b"}  # NaN neither rejects nor counts in m
    assert S.holm({}, 0.05) == set()
    assert S.holm_levels({"a": 0.01, "b": 0.5}, 0.05) == {"a": 0.025, "b": 0.05}


def test_a_level_never_contradicts_the_decision_holm_stopping_early_and_ties():
    """The level a check's interval is drawn at is the one its test was decided at: Holm that stopped before a
    p-value gives it the level it stopped at (a p of 0.00353 under its rank's 0.00625 but behind a 0.00331 that
    failed 0.003125 was not rejected, so it is not drawn at 0.00625, where its interval would exclude the
    threshold); tied p-values share one level whatever order they come in."""
    assert S.holm({"a": 0.00331, "b": 0.00353}, 0.00625) == set()
    assert S.holm_levels({"a": 0.00331, "b": 0.00353}, 0.00625) == {"a": 0.003125, "b": 0.003125}
    assert S.holm_levels({"a": 1.0, "b": 1.0, "c": 1.0}, 0.03) == {"a": 0.01, "b": 0.01, "c": 0.01}
    rng = random.Random(7)
    for _ in range(400):
        m = rng.randint(1, 12)
        ps = {k: rng.choice([rng.random() * 0.02, rng.choice([0.001, 0.004, 0.5])]) for k in range(m)}
        alpha = rng.choice([0.00625, 0.05])
        shuffled = dict(rng.sample(list(ps.items()), m))
        for rejects, levels in ((S.holm, S.holm_levels), (S.benjamini_hochberg, S.bh_levels)):
            level = levels(ps, alpha)
            assert {k for k, p in ps.items() if p <= level[k]} == rejects(ps, alpha), (ps, alpha)
            assert levels(shuffled, alpha) == level  # ties alike, whatever the order
            tied = [(a, b) for a in ps for b in ps if a < b and ps[a] == ps[b]]
            assert all(level[a] == level[b] for a, b in tied)


def test_hall_sheather_bandwidth_known_value():
    # quantreg's bandwidth.rq(0.95, 100, hs = TRUE): 0.0457 (computed independently)
    assert S.hall_sheather(100, 0.95, 0.95) == pytest.approx(0.04572, abs=2e-4)


def test_units_needed_grows_with_the_design_effect_and_the_sequential_price():
    base = dict(p_cloud=0.92, tolerance=0.03, delta=0.03, alpha=0.05 / 7 / 12, power=0.8, deff_cloud=1.0,
                cloud_share=0.25, tau=0.06 * 0.92)
    fixed = S.units_needed_ratio(deff_edge=1.0, sequential=False, **base)
    seq = S.units_needed_ratio(deff_edge=1.0, sequential=True, **base)
    clustered = S.units_needed_ratio(deff_edge=3.0, sequential=True, **base)
    assert fixed < seq < clustered
