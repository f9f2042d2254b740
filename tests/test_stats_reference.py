"""pipeline/gate/stats.py against independent implementations (scipy, statsmodels: test-only dependencies) on
ordinary cases and their edges (zero counts, rates of 0 and 1, tiny n, large n), and the parts of the gate
that the issue behind them found wrong: the sample size (Farrington-Manning with the null variance), the
design effect of a stratum at rate 0 or 1, the quantile interval's ranks, the half-normal mixture, and the
decision intervals (each the test inverted: a threshold outside it is one the test rejects)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, special
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from pipeline.gate import stats as S


@pytest.mark.parametrize("a,b,x", [(0.5, 0.5, 0.3), (2.0, 30.0, 0.01), (120.0, 7.5, 0.97), (1e4, 1e4, 0.5005),
                                   (3.3, 0.7, 0.999), (40.0, 2000.0, 0.0201), (1.0, 1.0, 1e-12)])
def test_betainc_equals_scipy(a, b, x):
    assert S.betainc(a, b, x) == pytest.approx(special.betainc(a, b, x), rel=1e-10, abs=1e-300)
    expected = math.log(special.betainc(a, b, x)) if special.betainc(a, b, x) > 0 else -math.inf
    assert S.log_betainc(a, b, x) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("n,p", [(1, 0.05), (10, 0.5), (500, 0.05), (20_000, 0.93), (7, 1e-6)])
def test_binomial_tails_equal_scipy(n, p):
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        assert S.binom_sf(k, n, p) == pytest.approx(sps.binom.sf(k - 1, n, p), rel=1e-9, abs=1e-300)
        assert S.binom_cdf(k, n, p) == pytest.approx(sps.binom.cdf(k, n, p), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 50), (50, 50), (3, 7), (81, 263), (9_000, 10_000)])
def test_wilson_equals_statsmodels(k, n):
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert S.wilson(k, n, 0.95) == pytest.approx((lo, hi), abs=1e-12)


@pytest.mark.parametrize("k,n", [(0, 20), (20, 20), (3, 40), (120, 1000), (1, 1)])
def test_fixed_rate_bounds_are_clopper_pearson(k, n):
    """One look, the exact binomial test inverted is the Clopper-Pearson bound (each side at alpha)."""
    alpha = 0.01
    lo, hi = S.rate_bounds(k, n, alpha, sequential=False)
    cp_lo, cp_hi = proportion_confint(k, n, alpha=2 * alpha, method="beta")
    if k == 0:
        assert lo is None or lo < 1e-9
    else:
        assert lo == pytest.approx(cp_lo, abs=1e-9)
    if k == n:
        assert hi is None or hi > 1 - 1e-9
    else:
        assert hi == pytest.approx(cp_hi, abs=1e-9)


@pytest.mark.parametrize("k,n", [(30, 200), (0, 300), (300, 300), (12.4, 80.7), (900, 20_000)])
def test_sequential_rate_bounds_invert_the_test(k, n):
    """The always-valid bounds: a threshold just past a bound is rejected, one just inside is not."""
    alpha = 0.007
    lo, hi = S.rate_bounds(k, n, alpha, sequential=True)
    for bound, above, outside in ((lo, True, -1e-6), (hi, False, 1e-6)):
        if bound is None:
            continue
        assert S.rate_p_value(k, n, bound + outside, above, True) <= alpha
        assert S.rate_p_value(k, n, bound - outside, above, True) > alpha
    if lo is not None and hi is not None:
        assert lo <= k / n <= hi


def test_holm_equals_statsmodels(monkeypatch):
    # statsmodels' Holm ends with gc.collect(), a full collection of this worker's heap per call (0.1-0.2 s);
    # it frees memory and changes no result
    monkeypatch.setattr("gc.collect", lambda generation=2: 0)
    rng = np.random.default_rng(11)
    for _ in range(200):
        p = rng.random(rng.integers(1, 15)) ** 3
        keys = {i: float(v) for i, v in enumerate(p)}
        reject = multipletests(p, alpha=0.05, method="holm")[0]
        assert S.holm(keys, 0.05) == {i for i, r in enumerate(reject) if r}


def test_half_normal_mixture_equals_integration_and_is_half_the_two_sided_one():
    """The mixture the sequential z tests run: N(0, tau^2) restricted to the harm side (density doubled).
    The issue's case z = 3.2, r = 25: one-sided 0.0186, the two-sided normal mixture 0.0371."""
    z, r = 3.2, 25.0
    var, tau = 1.0, 5.0  # r = tau^2 / var
    lr = lambda d: 2 * sps.norm.pdf(d, 0, tau) * math.exp(d * z / math.sqrt(var) - d * d / (2 * var))  # noqa: E731
    one_sided = integrate.quad(lr, 0, np.inf)[0]
    two_sided = integrate.quad(lambda d: lr(d) / 2, -np.inf, np.inf)[0]
    assert S.msprt_p_value(z, r) == pytest.approx(1 / one_sided, rel=1e-7)
    assert S.msprt_p_value(z, r) == pytest.approx(0.0186, abs=1e-4)
    assert 1 / two_sided == pytest.approx(0.0371, abs=1e-4)


@pytest.mark.parametrize("variance,tau,alpha", [(1e-4, 0.05, 0.007), (1.0, 1.0, 0.05), (0.02, 0.3, 1e-4)])
def test_z_boundary_is_where_the_p_value_reaches_alpha(variance, tau, alpha):
    z = S.z_boundary(variance, tau, alpha, sequential=True)
    assert S.z_p_value(z, variance, tau, True) == pytest.approx(alpha, rel=1e-6)
    assert S.z_boundary(variance, tau, alpha, sequential=False) == pytest.approx(sps.norm.isf(alpha), rel=1e-12)


@pytest.mark.parametrize("x1,n1,x2,n2,theta", [(70, 100, 90, 100, 0.97), (0, 40, 5, 60, 0.9),
                                              (40, 40, 38, 40, 0.97), (900.5, 1000.2, 230.1, 250.3, 0.97)])
def test_fm_restricted_mle_equals_numerical_maximisation(x1, n1, x2, n2, theta):
    def nll(p2: float) -> float:
        p1 = theta * p2
        return -(special.xlogy(x1, p1) + special.xlog1py(n1 - x1, -p1)
                 + special.xlogy(x2, p2) + special.xlog1py(n2 - x2, -p2))
    best = optimize.minimize_scalar(nll, bounds=(1e-12, min(1.0, 1 / theta) - 1e-12), method="bounded",
                                    options={"xatol": 1e-12})
    assert S.fm_restricted(x1, n1, x2, n2, theta)[1] == pytest.approx(best.x, abs=1e-6)


@pytest.mark.parametrize("p_cloud,share,deff_e,deff_c", [(0.92, 0.25, 1.0, 1.0), (0.92, 0.25, 3.0, 2.0),
                                                          (0.6, 1.0, 1.0, 1.0), (0.95, 0.1, 1.5, 1.5)])
def test_one_look_sample_size_is_farrington_manning(p_cloud, share, deff_e, deff_c):
    """n = (z_alpha sqrt(v0) + z_power sqrt(v1))^2 / gap^2 with v0 from the restricted MLE (the old code put
    the alternative's variance in the z_alpha term and under-sized)."""
    tol, delta, alpha, power, theta = 0.03, 0.03, 0.007, 0.8, 0.97
    p1, p2 = p_cloud * (1 - tol - delta), p_cloud
    r1, r2 = S.fm_restricted(p1, 1, p2 * share, share, theta)
    v0 = deff_e * r1 * (1 - r1) + theta**2 * deff_c * r2 * (1 - r2) / share
    v1 = deff_e * p1 * (1 - p1) + theta**2 * deff_c * p2 * (1 - p2) / share
    closed = (sps.norm.isf(alpha) * math.sqrt(v0) + sps.norm.ppf(power) * math.sqrt(v1)) ** 2 / (theta * p2 - p1) ** 2
    n = S.units_needed_ratio(p_cloud, tol, delta, alpha, power, deff_e, deff_c, share, 0.055, sequential=False)
    assert math.ceil(closed) == n


@pytest.mark.parametrize("sequential", [False, True])
def test_ratio_power_inverts_the_sample_size(sequential):
    """At the size units_needed_ratio states the power is 0.80 (to the step of one unit), below it less, and
    for one look it is the closed form Phi((gap sqrt(n) - z_alpha sqrt(v0)) / sqrt(v1))."""
    args = (0.92, 0.03, 0.03, 0.007, 1.4, 1.1, 0.25, 2 * 0.03 * 0.92, sequential)
    n = S.units_needed_ratio(*args[:4], 0.8, *args[4:])
    assert S.ratio_power(*args, n) == pytest.approx(0.80, abs=0.002)
    assert S.ratio_power(*args, n - 1) < 0.80 <= S.ratio_power(*args, n)
    assert S.ratio_power(*args, n / 2) < 0.5
    if not sequential:
        theta, p2, p1 = 0.97, 0.92, 0.92 * 0.94
        r1, r2 = S.fm_restricted(p1, 1, p2 * 0.25, 0.25, theta)
        v0 = 1.4 * r1 * (1 - r1) + theta**2 * 1.1 * r2 * (1 - r2) / 0.25
        v1 = 1.4 * p1 * (1 - p1) + theta**2 * 1.1 * p2 * (1 - p2) / 0.25
        gap = theta * p2 - p1
        closed = sps.norm.cdf((gap * math.sqrt(5000) - sps.norm.isf(0.007) * math.sqrt(v0)) / math.sqrt(v1))
        assert S.ratio_power(*args, 5000) == pytest.approx(closed, rel=1e-9)


def test_sample_size_delivers_its_power_in_simulation():
    """At the size it states, the one-look score test rejects a loss of twice the tolerance in 80 % of
    simulated releases (binomial rows), within 3 points, sequential as well at its boundary."""
    rng = np.random.default_rng(25)
    tol, share, p_cloud, alpha, tau = 0.03, 0.25, 0.92, 0.007, 2 * 0.03 * 0.92
    for sequential in (False, True):
        n = S.units_needed_ratio(p_cloud, tol, tol, alpha, 0.8, 1.0, 1.0, share, tau, sequential)
        m = round(n * share)
        x1 = rng.binomial(n, p_cloud * (1 - 2 * tol), 20_000)
        x2 = rng.binomial(m, p_cloud, 20_000)
        hits = 0
        for a, b in zip(x1, x2, strict=True):
            strata = [S.Stratum(S.DeviceRatio(n, n, a, math.nan), S.DeviceRatio(m, m, b, math.nan))]
            d, var = S.stratified_ratio_score(strata, 1 - tol)
            hits += S.z_p_value(-d / math.sqrt(var), var, tau, sequential) <= alpha
        assert hits / 20_000 == pytest.approx(0.80, abs=0.03), (sequential, n, hits)


@pytest.mark.parametrize("p0,p1,above,alpha", [(0.90, 0.80, False, 0.007), (0.15, 0.30, True, 0.0036),
                                                 (0.05, 0.10, True, 0.05), (0.99, 0.98, False, 0.001)])
def test_rate_sample_size_delivers_its_power_exactly_for_one_look(p0, p1, above, alpha):
    """The one-sample rate test's size for one look, against the exact binomial power from scipy: the
    critical count at n (the last count the exact test rejects) has probability ~0.80 under p1, within the
    normal approximation and the lattice's steps, and one tenth fewer values fall short."""
    def power(n: int) -> float:
        if above:  # rejects k >= c, the smallest c with P(X >= c) <= alpha under p0
            c = int(sps.binom.isf(alpha, n, p0))
            while sps.binom.sf(c - 1, n, p0) > alpha:
                c += 1
            return float(sps.binom.sf(c - 1, n, p1))
        c = int(sps.binom.ppf(alpha, n, p0))  # rejects k <= c, the largest c with P(X <= c) <= alpha
        while sps.binom.cdf(c, n, p0) > alpha:
            c -= 1
        return float(sps.binom.cdf(c, n, p1))

    n = S.rate_units_needed(p0, p1, above, alpha, 0.8, sequential=False)
    assert power(n) == pytest.approx(0.80, abs=0.04), n
    assert power(round(n * 0.9)) < 0.80
    assert S.rate_units_needed(p0, p1, not above, alpha, 0.8, sequential=False) is None  # p1 on the wrong side


def test_rate_sample_size_sequential_delivers_its_power_in_simulation():
    """The mixture test at the stated size, one look, 4,000 binomial draws: 80 % within 3 points."""
    rng = np.random.default_rng(29)
    p0, p1, alpha = 0.90, 0.80, 0.007
    n = S.rate_units_needed(p0, p1, False, alpha, 0.8, sequential=True)
    hits = sum(S.rate_p_value(k, n, p0, False, True) <= alpha for k in rng.binomial(n, p1, 4_000))
    assert hits / 4_000 == pytest.approx(0.80, abs=0.03), (n, hits)


@pytest.mark.parametrize("gap,v,alpha", [(0.05, 0.2, 0.007), (0.01, 0.09, 0.05), (0.2, 3.0, 0.0005)])
def test_difference_sample_size_equals_the_closed_form(gap, v, alpha):
    closed = (sps.norm.isf(alpha) + sps.norm.ppf(0.8)) ** 2 * v / gap**2
    assert S.units_needed_difference(gap, v, alpha, 0.8, 0.1, sequential=False) == math.ceil(closed)
    seq = S.units_needed_difference(gap, v, alpha, 0.8, 2 * gap, sequential=True)
    assert seq > math.ceil(closed)  # the always-valid boundary costs values
    z = gap * math.sqrt(seq / v) - sps.norm.ppf(0.8)
    assert S.msprt_p_value(z, (2 * gap) ** 2 / (v / seq)) <= alpha
    assert S.units_needed_difference(0.0, v, alpha, 0.8, 0.1, sequential=False) is None


def test_a_stratum_at_rate_0_or_1_keeps_the_pools_design_effect():
    pooled = 3.5
    for k in (0, 40):
        stratum = S.device_ratio(8, 40, k, 220, k * k / 8, k * 220 / 40).in_pool(pooled)
        assert stratum.design_effect == pooled
    edge = S.DeviceRatio(10, 40, 40, 0.0).in_pool(pooled)
    cloud = S.DeviceRatio(10, 40, 36, 0.0).in_pool(2.0)
    _, var = S.stratified_ratio_score([S.Stratum(edge, cloud)], 0.97)
    p1, p2 = S.fm_restricted(40, 40, 36, 40, 0.97)
    assert var == pytest.approx(pooled * p1 * (1 - p1) / 40 + 0.97**2 * 2.0 * p2 * (1 - p2) / 40, rel=1e-12)


def test_per_device_weights_allow_a_design_effect_below_one_but_not_below_independent_rows():
    """Every device weighs 1 (the mean of per-device rates): 100 devices of 50 rows with identical rates have
    a between-device variance of 0, and the design effect stops at independent rows: mean(1 / n_i) = 0.02."""
    m, rows = 100, 50
    r = S.device_ratio(m, m, 0.9 * m, m, m * 0.81, 0.9 * m, independent_deff=1 / rows)
    assert r.design_effect == pytest.approx(1 / rows)
    spread = np.random.default_rng(1).beta(9, 1, m)
    r = S.device_ratio(m, m, spread.sum(), m, (spread**2).sum(), spread.sum(), independent_deff=1 / rows)
    expected = m / (m - 1) * ((spread - spread.mean()) ** 2).sum() / m**2 / (spread.mean() * (1 - spread.mean()) / m)
    assert r.design_effect == pytest.approx(max(1 / rows, expected), rel=1e-12)


def test_quantile_interval_reads_ranks_outward_and_keeps_a_low_lower_bound():
    """n = 80 effective values on a 1..300 grid: the upper rank is 80 of 80, the 300th value, not the 297th;
    with n = 8 the lower bound (rank 6, 0.75) sits below the old grid's 0.80 and is now read off its coarse
    fractions."""
    values = np.arange(1, 301, dtype=float)
    grid = [values[max(0, math.ceil(f * 300) - 1)] for f in S.QUANTILE_GRID]
    lo_rank, hi_rank = S.order_statistic_ranks(80, 0.95, 0.95)
    assert hi_rank == 80
    lo, hi = S.quantile_interval(grid, 80, 0.95, 0.95)
    assert hi == 300.0 and lo <= 300 * lo_rank / 80
    lo_rank, _ = S.order_statistic_ranks(8, 0.95, 0.95)
    assert lo_rank / 8 < 0.80
    lo, _ = S.quantile_interval(grid, 8, 0.95, 0.95)
    assert lo is not None and lo <= 300 * lo_rank / 8


def test_p95_decision_interval_agrees_with_the_budget_test():
    """The p95 interval the gate prints is the budget test inverted on the grid: a budget below its lower
    bound is one whose share-above test rejects, one above its upper bound is proven safe."""
    rng = np.random.default_rng(7)
    x = np.sort(rng.lognormal(0, 0.35, 2000))
    grid = [x[max(0, math.ceil(f * len(x)) - 1)] for f in S.QUANTILE_GRID]
    n_eff, alpha = 900.0, 0.007
    lo, hi = S.quantile_bounds_by_test(grid, n_eff, 0.95, alpha, sequential=True)
    assert lo < np.quantile(x, 0.95) < hi
    for budget, above in ((lo * 0.99, True), (hi * 1.01, False)):
        share = (x > budget).mean()
        assert S.rate_p_value(share * n_eff, n_eff, 0.05, above, True) <= alpha


@pytest.mark.parametrize("latent", [0.02, 0.3, 0.6, 0.9, 0.999])
@pytest.mark.parametrize("share_above", [0.05, 0.2])
def test_exceedance_correlation_is_the_bivariate_normal_orthant(latent, share_above):
    from scipy.stats import multivariate_normal, norm

    h = norm.ppf(1 - share_above)
    both = multivariate_normal(mean=[0, 0], cov=[[1, latent], [latent, 1]]).cdf([-h, -h])
    expected = (both - share_above**2) / (share_above * (1 - share_above))
    assert S.exceedance_correlation(latent, share_above) == pytest.approx(expected, abs=1e-7)
