"""The statistics the gate needs, in plain Python (no SciPy on the gate's path).

The unit of independence is the device. Every rate the gate tests is a ratio of
per-request counts summed over devices (adopted / rows, exceedances of a budget /
values, ...), and one phone sends many correlated requests, so:

- `DeviceRatio`: the ratio estimator with its cluster-robust (delta-method)
  variance over devices, Deng, Knoblich & Lu (2018), "Applying the delta method
  in metric analytics", KDD; its design effect (Kish) is that variance over the
  binomial one, and the effective counts are the counts divided by it.
- Tests of a rate against a fixed threshold use the effective counts:
  - sequential (anytime-valid): a mixture likelihood ratio with a uniform prior
    over the alternatives up to 20 points past the threshold (Robbins 1970;
    Ville's inequality makes P(ever M >= 1/alpha) <= alpha under the null,
    however often one looks);
  - fixed (one look): the exact binomial tail, via the regularized incomplete
    beta function.
- Tests that compare with the cloud are z statistics on device-level variances:
  - sequential: the one-sided normal-mixture SPRT (mSPRT) of Johari, Koomen,
    Pekelis & Walsh (2017/2022), "Always valid inference", with mixing
    variance tau^2 on the effect scale; fixed: the normal tail;
  - adoption: the Farrington-Manning (1990) score statistic for a ratio of
    rates (restricted MLE under the null), each arm's variance times its device
    design effect, strata combined with Mantel-Haenszel weights.
- Quantiles: distribution-free intervals from exact binomial ranks of true
  order statistics, and the Hall-Sheather (1988) bandwidth for the sparsity
  (1 / density) a quantile's variance needs (Bahadur's representation).
- Holm (1979) step-down inside each gate; NaN p-values are never rejections.

Why one module: the gate's statistical primitives, with no dependency on the pipeline, each tested
against known values (tests/test_stats.py) and against SciPy (tests/test_stats_reference.py) in one place.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

_N = NormalDist()

# Fractions at which the gate SQL asks DuckDB for quantile_disc (true order statistics:
# quantile_disc(x, f) is the ceil(f * n)-th smallest value); interval bounds are read off
# this grid, rounded outwards.
# A few coarse fractions below 0.80 let a wide lower bound (few values, a large design effect) still be read.
QUANTILE_GRID: list[float] = [0.5, 0.6, 0.7, 0.75] + [round(0.80 + i / 1000, 3) for i in range(200)] + [1.0]


def z_two_sided(confidence: float) -> float:
    return _N.inv_cdf(0.5 + confidence / 2)


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal, accurate in the far tail."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def _log_normal_cdf(z: float) -> float:
    if z > -30:
        return math.log(0.5 * math.erfc(-z / math.sqrt(2)))
    return -z * z / 2 - math.log(-z) - 0.5 * math.log(2 * math.pi)  # Mills ratio


# ------------------------------------------------------------------ device-level ratios


@dataclass(frozen=True)
class DeviceRatio:
    """sum(k_i) / sum(n_i) over m devices, with the cluster-robust variance of the ratio.

    n_i and k_i are each device's *weighted* counts (gates/admission.yaml `statistics.estimand`): with
    `requests` a device weighs its rows, with `per_device` every device weighs 1 (k_i is its own rate),
    with `capped_requests` min(rows, cap). The design effect is the variance over the binomial one of the
    same weighted total; `deff_floor` is its value if every row were an independent draw (1 for requests,
    below 1 when devices weigh less than their rows), so it never claims more than independent rows."""

    devices: int
    n: float
    k: float
    variance: float  # of k / n, cluster-robust
    deff_floor: float = 1.0  # the design effect is at least this (independent rows; few devices: the worst case)
    pooled_deff: float | None = None  # a stratum of a pool carries the pool's design effect (devices cross strata)

    @property
    def rate(self) -> float:
        return self.k / self.n if self.n else math.nan

    @property
    def binomial_variance(self) -> float:
        p = self.rate
        return p * (1 - p) / self.n if self.n else math.nan

    @property
    def design_effect(self) -> float:
        """Cluster-robust over binomial variance, never below `deff_floor`; the floor when the rate is 0 or 1
        (no spread to measure) unless the ratio is a stratum of a pool, which keeps the pool's."""
        if self.pooled_deff is not None:
            return self.pooled_deff
        b = self.binomial_variance
        if not b or not math.isfinite(b) or not math.isfinite(self.variance):
            return self.deff_floor
        return max(self.deff_floor, self.variance / b)

    @property
    def n_eff(self) -> float:
        return self.n / self.design_effect

    @property
    def k_eff(self) -> float:
        return self.k / self.design_effect

    def in_pool(self, deff: float) -> DeviceRatio:
        """This ratio as a stratum of a pool whose design effect is `deff`."""
        return DeviceRatio(self.devices, self.n, self.k, self.variance, self.deff_floor, deff)


def device_ratio(devices: int, n: float, k: float, nn: float, kk: float, kn: float,
                 min_devices: int = 2, independent_deff: float = 1.0) -> DeviceRatio:
    """From per-device sums: n = sum n_i, k = sum k_i, nn = sum n_i^2, kk = sum k_i^2, kn = sum k_i n_i.
    Var(k/n) = m / (m - 1) * sum (k_i - p n_i)^2 / n^2 (delta method, ratio of means).
    `independent_deff` is the design effect if every row were independent (sum w_i^2 / rows_i / sum w_i for
    weights w_i; 1 when devices weigh their rows). With fewer than `min_devices` devices the variance is not to
    be trusted, and the design effect is taken at its worst case, every device's rows fully correlated:
    sum n_i^2 / sum n_i (the effective count is then Kish's effective number of devices, n^2 / sum n_i^2)."""
    floor = independent_deff
    if n > 0 and devices < min_devices:
        floor = max(floor, nn / n)
    if n <= 0 or devices < 2:
        return DeviceRatio(devices, n, k, math.inf if n > 0 else math.nan, floor)
    p = k / n
    ss = max(0.0, kk - 2 * p * kn + p * p * nn)
    return DeviceRatio(devices, n, k, devices / (devices - 1) * ss / (n * n), floor)


# ------------------------------------------------------------------ special functions


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1) < eps:
            break
    return h


def log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), a, b > 0."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - log_beta(a, b))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def log_betainc(a: float, b: float, x: float) -> float:
    """log I_x(a, b), without underflow far in the tails (where I itself is below 1e-308). SciPy's betainc and
    betaincc (Boost's ibeta: a few microseconds, where the continued fraction below needs thousands of terms for
    the large a and b of a big segment) wherever their value is representable; the continued fraction, in logs,
    past that."""
    if x <= 0:
        return -math.inf
    if x >= 1:
        return 0.0
    lower_of, upper_of = _ibeta()
    lower = float(lower_of(a, b, x))
    if _REPRESENTABLE < lower <= 0.5:
        return math.log(lower)
    if lower > 0.5:
        upper = float(upper_of(a, b, x))
        if upper > _REPRESENTABLE:
            return math.log1p(-upper)
    if x < (a + 1) / (a + b + 2):
        return a * math.log(x) + b * math.log1p(-x) - log_beta(a, b) + math.log(_betacf(a, b, x) / a)
    upper_log = b * math.log1p(-x) + a * math.log(x) - log_beta(a, b) + math.log(_betacf(b, a, 1 - x) / b)
    return math.log1p(-math.exp(upper_log)) if upper_log < 0 else -math.inf


_REPRESENTABLE = 1e-290  # below it SciPy's value loses digits to subnormals, or is 0: the tails take logs


@functools.cache
def _ibeta() -> tuple[Callable[[float, float, float], float], Callable[[float, float, float], float]]:
    """SciPy's regularized incomplete beta and its complement, imported on first use (0.3 s: not at start-up)."""
    from scipy.special import betainc as lower
    from scipy.special import betaincc as upper

    return lower, upper


def _log_diff(log_hi: float, log_lo: float) -> float:
    """log(exp(log_hi) - exp(log_lo)) for log_hi >= log_lo."""
    if log_lo == -math.inf:
        return log_hi
    if log_hi <= log_lo:
        return -math.inf
    return log_hi + math.log1p(-math.exp(log_lo - log_hi))


def binom_sf(k: float, n: float, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p); real k and n are allowed (effective counts)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return betainc(k, n - k + 1, p)


def binom_cdf(k: float, n: float, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p); real k and n are allowed."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return betainc(n - k, k + 1, 1 - p)


# ------------------------------------------------------------------ tests of a rate against a threshold


_LOG_HALF = math.log(0.5)
MIXTURE_WIDTH = 0.2  # the prior of the rate tests spreads evenly over alternatives up to 20 points past p0


def mixture_width(p0: float, above: bool, relative_width: float | None) -> float:
    """The width w of the rate tests' prior: MIXTURE_WIDTH, or relative_width x the room on the alternative's side
    (p0 above, 1 - p0 below): a small ceiling's test (kill_rate's 1 %) weighs the alternatives worth catching
    (twice the ceiling) instead of spreading its prior over rates 20 points away."""
    return MIXTURE_WIDTH if relative_width is None else relative_width * (p0 if above else 1 - p0)


def _log_mixture_lr(k: float, n: float, p0: float, above: bool, width: float = MIXTURE_WIDTH) -> float:
    """log of the likelihood ratio of a uniform prior on (p0, p0 + w) (above) or (p0 - w, p0) (below),
    w = width clipped to [0, 1], against p = p0, for k successes in n: a nonnegative
    supermartingale under any rate on the null side, so Ville's inequality bounds its crossing.
    All in logs: the prior's mass under the likelihood is far below 1e-308 when the data sit outside it."""
    a, b = k + 1, n - k + 1
    lo, hi = (p0, min(1.0, p0 + width)) if above else (max(0.0, p0 - width), p0)
    # mass = I_hi - I_lo, or the difference of the upper tails I_(1-lo)(b, a) - I_(1-hi)(b, a)
    log_lower_lo = log_betainc(a, b, lo)
    if log_lower_lo < _LOG_HALF:
        log_mass = _log_diff(log_betainc(a, b, hi), log_lower_lo)
    else:
        log_mass = _log_diff(log_betainc(b, a, 1 - lo), log_betainc(b, a, 1 - hi))
    if log_mass == -math.inf:
        return -math.inf
    log_l0 = k * math.log(p0) + (n - k) * math.log1p(-p0)
    return log_beta(a, b) + log_mass - math.log(hi - lo) - log_l0


def rate_p_value(k: float, n: float, p0: float, above: bool, sequential: bool,
                 relative_width: float | None = None) -> float:
    """p-value of 'the rate is on the null side of p0' (above=True: small p means the rate is above p0).
    Sequential: 1 / mixture likelihood ratio, valid at every look (an always-valid p-value), its prior as wide
    as mixture_width says. Fixed: the exact binomial tail, valid for one look. NaN when there is nothing to test."""
    if n <= 0 or not 0 < p0 < 1:
        return math.nan
    return math.exp(_log_rate_p_value(k, n, p0, above, sequential, relative_width))


def _log_rate_p_value(k: float, n: float, p0: float, above: bool, sequential: bool,
                      relative_width: float | None) -> float:
    """log of `rate_p_value` (n > 0, 0 < p0 < 1), without its underflow to 0 far from p0: what rate_bounds
    inverts. Fixed: log P(X >= k) (above) or log P(X <= k) of X ~ Binomial(n, p0), as binom_sf/binom_cdf."""
    if sequential:
        return min(0.0, -_log_mixture_lr(k, n, p0, above, mixture_width(p0, above, relative_width)))
    if above:
        return 0.0 if k <= 0 else -math.inf if k > n else log_betainc(k, n - k + 1, p0)
    return -math.inf if k < 0 else 0.0 if k >= n else log_betainc(n - k, k + 1, 1 - p0)


def srm_p_value(counts: Sequence[float], expected: Sequence[float], concentration: float) -> float:
    """Anytime-valid p-value that `counts` (units per arm, assigned one by one) follow the `expected` shares:
    1 / the Bayes factor of a Dirichlet-multinomial mixture over the multinomial of the declared shares; a
    nonnegative martingale under the null, so by Ville's inequality P(p <= alpha at any look) <= alpha (Lindon &
    Malek 2020, "Anytime-valid inference for multinomial count data", the test of Optimizely's ssrm-test). The
    Bayes factor is averaged over the priors Dirichlet(c x expected) for c = concentration and 100, 10^4 and
    10^6 times less (at least 1): an average of Bayes factors is one too, and a prior as tight as the smallest
    deviation worth flagging alone would take long to see a gross one. An arm declared at 0 % is a leak, not
    this test's business: the arms with a positive share are tested. NaN when there is nothing to test."""
    arms = [(float(n), float(p)) for n, p in zip(counts, expected, strict=True) if p > 0]
    total = sum(n for n, _ in arms)
    if len(arms) < 2 or total <= 0 or concentration <= 0:
        return math.nan
    norm = sum(p for _, p in arms)
    logs = [_log_dirichlet_bf(arms, total, norm, max(1.0, concentration / 100**j)) for j in range(SRM_PRIORS)]
    top = max(logs)
    log_bf = top + math.log(sum(math.exp(x - top) for x in logs) / SRM_PRIORS)
    return min(1.0, math.exp(-log_bf))


SRM_PRIORS = 4  # the priors srm_p_value averages over, equally weighted


def _log_dirichlet_bf(arms: list[tuple[float, float]], total: float, norm: float, c: float) -> float:
    log_bf = math.lgamma(c) - math.lgamma(c + total)
    for n, p in arms:
        a = c * p / norm
        log_bf += math.lgamma(a + n) - math.lgamma(a) - n * math.log(p / norm)
    return log_bf


def srm_concentration(share: float, deviation: float) -> float:
    """The tightest prior's concentration c: it spreads a share p with standard deviation 2 x `deviation`
    (sqrt(p (1 - p) / (c + 1))), so the test is most sensitive to deviations about twice the smallest one worth
    flagging, as the mixture SPRTs here are tuned to twice a tolerance."""
    spread = 2 * max(deviation, 1e-6)
    return max(1.0, share * (1 - share) / spread**2 - 1)


def bisect(decides: Callable[[float], bool], lo: float, hi: float, steps: int = 60) -> float:
    """The boundary in [lo, hi] where `decides` (true at lo, false at hi) turns false."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if decides(mid) else (lo, mid)
    return (lo + hi) / 2


def crossing(f: Callable[[float], float], lo: float, hi: float, tolerance: float = 1e-12) -> float:
    """Where a continuous f with f(lo) <= 0 < f(hi) crosses zero, to within `tolerance`: the Illinois method
    (regula falsi that halves the value kept at a stale end; Dowell & Jarratt, BIT 11, 1971), with a
    bisection step whenever a step fails to halve the bracket. A smooth f takes ~10 evaluations where
    bisection to 1e-12 takes 42."""
    f_lo, f_hi, stale, moved = f(lo), f(hi), 0, 0
    while hi - lo > tolerance:
        width = hi - lo
        x = (lo * f_hi - hi * f_lo) / (f_hi - f_lo) if stale < 2 else (lo + hi) / 2
        if not lo < x < hi:
            x = (lo + hi) / 2
        f_x = f(x)
        if f_x <= 0:
            lo, f_lo = x, f_x
            if moved < 0:
                f_hi /= 2
            moved = -1
        else:
            hi, f_hi = x, f_x
            if moved > 0:
                f_lo /= 2
            moved = 1
        stale = stale + 1 if hi - lo > width / 2 else 0
    return (lo + hi) / 2


@functools.lru_cache(maxsize=65_536)
def rate_bounds(k: float, n: float, alpha: float, sequential: bool,
                relative_width: float | None = None) -> tuple[float | None, float | None]:
    """The confidence sequence (sequential) or interval (fixed) of a rate that the rate test decides by:
    lower = the largest p0 that `rate_p_value(..., above=True)` rejects at alpha, upper = the smallest p0
    that `above=False` rejects; each side at `alpha`, so a threshold outside [lower, upper] is exactly a
    threshold the test rejects (up to 1e-12). None on a side no p0 in (0, 1) is rejected."""
    if n <= 0:
        return None, None
    tiny, log_alpha = 1e-12, math.log(alpha)

    def above(p0: float) -> float:  # <= 0 where the test of "the rate is at most p0" rejects
        return _log_rate_p_value(k, n, p0, True, sequential, relative_width) - log_alpha

    def below(q: float) -> float:  # the same for "the rate is at least 1 - q"
        return _log_rate_p_value(k, n, 1 - q, False, sequential, relative_width) - log_alpha

    lo = hi = None
    if above(tiny) <= 0:
        lo = 1 - tiny if above(1 - tiny) <= 0 else crossing(above, tiny, 1 - tiny)
    if below(tiny) <= 0:
        hi = tiny if below(1 - tiny) <= 0 else 1 - crossing(below, tiny, 1 - tiny)
    return lo, hi


def z_boundary(variance: float, tau: float, alpha: float, sequential: bool) -> float:
    """The z at which the one-sided test of `z_p_value` reaches alpha (the half-width of its interval in
    standard errors): the normal quantile for one look, the mixture SPRT's boundary for a sequence."""
    if not sequential:
        return _N.inv_cdf(1 - alpha)
    if not (math.isfinite(variance) and variance > 0):
        return math.nan
    r = tau * tau / variance
    return bisect(lambda z: msprt_p_value(z, r) > alpha, 0.0, 100.0)


def smallest_n(holds: Callable[[int], bool], start: int, limit: int) -> int | None:
    """The smallest n >= start/2 for which `holds` (monotone in n) is true, None past `limit`:
    doubling from `start`, then bisection."""
    hi = start
    while not holds(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds(mid) else (mid, hi)
    return hi


@functools.lru_cache(maxsize=1024)
def values_needed(p0: float, above: bool, alpha: float, sequential: bool, limit: int = 10_000_000,
                  relative_width: float | None = None) -> int | None:
    """The fewest (effective) values with which the most extreme outcome (all beyond p0, or none)
    reaches alpha: fewer can never decide, so the gate says insufficient_data and this figure."""
    if not 0 < p0 < 1:
        return None

    def decides(n: int) -> bool:
        return rate_p_value(n if above else 0, n, p0, above, sequential, relative_width) <= alpha

    return smallest_n(decides, 1, limit)


# ------------------------------------------------------------------ z tests against the cloud


def msprt_p_value(z: float, r: float) -> float:
    """Always-valid p-value of the one-sided mixture SPRT with a *half-normal* mixing distribution: the
    alternatives are weighted by a normal N(0, tau^2) truncated to the harm side (effect > 0), the one-sided
    form of Johari et al.'s normal-mixture mSPRT (whose two-sided normal mixture gives about twice this
    p-value: z = 3.2, r = 25: 0.0186 here, 0.0371 two-sided). One-sided because the gate acts on one
    direction only; the mixture over that side alone is still a nonnegative martingale under the null
    boundary, so Ville's inequality holds. z is the standardized effect toward the alternative,
    r = tau^2 / Var(estimate). M = 2 (1+r)^-1/2 exp(z^2 r / (2(1+r))) Phi(z sqrt(r/(1+r))); p = min(1, 1/M)."""
    if not (math.isfinite(z) and math.isfinite(r)) or r <= 0:
        return math.nan
    s = r / (1 + r)
    log_m = math.log(2) - 0.5 * math.log1p(r) + z * z * s / 2 + _log_normal_cdf(z * math.sqrt(s))
    return min(1.0, math.exp(-log_m))


def z_p_value(z: float, variance: float, tau: float, sequential: bool) -> float:
    """p-value of a one-sided z test (small p: evidence toward the alternative)."""
    if not (math.isfinite(z) and math.isfinite(variance)) or variance <= 0:
        return math.nan
    return msprt_p_value(z, tau * tau / variance) if sequential else normal_sf(z)


def fm_restricted(x1: float, n1: float, x2: float, n2: float, theta: float) -> tuple[float, float]:
    """Farrington-Manning restricted MLE (p1, p2) under p1 = theta * p2."""
    a = theta * (n1 + n2)
    b = -(theta * n1 + x1 + n2 + theta * x2)
    c = x1 + x2
    p2 = (-b - math.sqrt(max(0.0, b * b - 4 * a * c))) / (2 * a)
    p2 = min(max(p2, 0.0), 1.0)
    return min(theta * p2, 1.0), p2


@dataclass(frozen=True)
class Stratum:
    """One network bucket of a comparison: edge and cloud device-level ratios."""

    edge: DeviceRatio
    cloud: DeviceRatio


def stratified_ratio_score(strata: Sequence[Stratum], theta: float) -> tuple[float, float]:
    """(D, Var D) for D = sum w (p_e - theta p_c) / sum w over strata, with Mantel-Haenszel weights
    w = n_e n_c / (n_e + n_c), Farrington-Manning restricted variances, and each arm's variance
    times its device design effect. D < 0: the edge is below theta x the cloud."""
    num = den = var = 0.0
    for s in strata:
        e, c = s.edge, s.cloud
        if e.n <= 0 or c.n <= 0:
            continue
        w = e.n * c.n / (e.n + c.n)
        p1, p2 = fm_restricted(e.k, e.n, c.k, c.n, theta)
        v = e.design_effect * p1 * (1 - p1) / e.n + theta**2 * c.design_effect * p2 * (1 - p2) / c.n
        num += w * (e.rate - theta * c.rate)
        den += w
        var += w * w * v
    if den == 0:
        return math.nan, math.nan
    return num / den, var / (den * den)


def stratified_relative_loss(strata: Sequence[Stratum], confidence: float) -> tuple[float, tuple[float, float]]:
    """1 - (MH-weighted edge rate) / (MH-weighted cloud rate) and its delta-method interval from the
    device-level variances (arms independent)."""
    ws = [(s.edge.n * s.cloud.n / (s.edge.n + s.cloud.n), s) for s in strata if s.edge.n > 0 and s.cloud.n > 0]
    total = sum(w for w, _ in ws)
    if not total:
        return math.nan, (math.nan, math.nan)
    e = sum(w * s.edge.rate for w, s in ws) / total
    c = sum(w * s.cloud.rate for w, s in ws) / total
    if c <= 0:
        return math.nan, (math.nan, math.nan)
    ve = sum(w * w * _robust(s.edge) for w, s in ws) / total**2
    vc = sum(w * w * _robust(s.cloud) for w, s in ws) / total**2
    ratio = e / c
    half = z_two_sided(confidence) * math.sqrt((ve + ratio * ratio * vc) / (c * c))
    return 1 - ratio, (1 - ratio - half, 1 - ratio + half)


def _robust(r: DeviceRatio) -> float:
    return r.binomial_variance * r.design_effect


# ------------------------------------------------------------------ intervals


def wilson(k: float, n: float, confidence: float) -> tuple[float, float] | None:
    """Wilson score interval; with effective counts it carries the device design effect."""
    if n <= 0:
        return None
    z = z_two_sided(confidence)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@functools.lru_cache(maxsize=4096)
def order_statistic_ranks(n: int, p: float, confidence: float) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the order statistics that bound the p-quantile of n values with
    probability >= confidence (each side (1 - confidence) / 2), exact from the binomial:
    P(X_(l) <= q_p) = P(Bin(n, p) >= l), P(X_(u) >= q_p) = P(Bin(n, p) <= u - 1).
    None on a side where n is too small for any order statistic to bound it."""
    if n <= 0:
        return None, None
    tail = (1 - confidence) / 2
    # binom_sf(r) falls and binom_cdf(r - 1) rises with r: bisect for the ranks (log n evaluations, not sqrt n)
    lo = _monotone_edge(lambda r: binom_sf(r, n, p) >= 1 - tail, min(n, math.ceil(n * p)), first=1)
    first = max(1, math.floor(n * p))
    below = _monotone_edge(lambda r: binom_cdf(r - 1, n, p) < 1 - tail, n, first)  # the last rank short of it
    hi = first if below is None else below + 1 if below < n else None
    return lo, hi


def quantile_interval(grid_values: Sequence[float] | None, n: float, p: float,
                      confidence: float) -> tuple[float | None, float | None] | None:
    """Bounds for the p-quantile read off quantile_disc over QUANTILE_GRID: exact ranks (l, u) for `n` values
    (pass the effective count to carry the design effect), rounded outwards onto the grid. Rank r of n values
    sits at the fraction r / n of the sample, so the lower bound is the grid's value at the largest fraction
    <= l / n and the upper at the smallest fraction >= u / n (with n the true count this is the order
    statistic itself, or the next one out). A side is None where no order statistic bounds it, or where its
    bound lies below the grid's first fraction (the grid holds no value that low)."""
    if grid_values is None or len(grid_values) == 0 or n < 1:
        return None
    lo_rank, hi_rank = order_statistic_ranks(int(math.floor(n)), p, confidence)
    lo = hi = None
    if lo_rank is not None:
        idx = [i for i, f in enumerate(QUANTILE_GRID) if f * n <= lo_rank + 1e-9]
        lo = float(grid_values[max(idx)]) if idx else None
    if hi_rank is not None:
        idx = [i for i, f in enumerate(QUANTILE_GRID) if f * n >= hi_rank - 1e-9]
        hi = float(grid_values[min(idx)]) if idx else None
    return lo, hi


def quantile_bounds_by_test(grid_values: Sequence[float] | None, n_eff: float, p: float, alpha: float,
                            sequential: bool) -> tuple[float | None, float | None] | None:
    """The interval of the p-quantile that the budget test decides by. A budget b fails when the test
    (`rate_p_value` at alpha on n_eff effective values) finds the share of values above b past 1 - p, and is
    proven safe when it finds that share below. Read off the order statistics on QUANTILE_GRID, the share
    above the grid's value at fraction f being 1 - f: the lower bound is the value at the largest f whose
    share the test finds past 1 - p, the upper the value at the smallest f whose share it finds below.
    None on a side no grid value settles (too few values, or a bound outside the grid)."""
    if grid_values is None or len(grid_values) == 0 or n_eff <= 0:
        return None

    def harm(i: int) -> bool:  # true for small i (a large share above), false from some i on
        share = 1 - QUANTILE_GRID[i]
        return rate_p_value(share * n_eff, n_eff, 1 - p, True, sequential) <= alpha

    def safe(i: int) -> bool:  # false for small i, true from some i on
        share = 1 - QUANTILE_GRID[i]
        return rate_p_value(share * n_eff, n_eff, 1 - p, False, sequential) <= alpha

    last = len(QUANTILE_GRID) - 1
    lo = _monotone_edge(harm, last)  # harm holds for the low fractions; safe from some fraction on
    before_safe = _monotone_edge(lambda i: not safe(i), last) if not safe(0) else -1
    return (float(grid_values[lo]) if lo is not None else None,
            float(grid_values[before_safe + 1]) if before_safe is not None and before_safe < last else None)


def _monotone_edge(holds: Callable[[int], bool], last: int, first: int = 0) -> int | None:
    """The last i in first..last where `holds` (true up to some i, false after) is true; None if it never is."""
    if first > last or not holds(first):
        return None
    a, b = first, last
    if holds(b):
        return b
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if holds(mid) else (a, mid)
    return a


def anova_design_effect(devices: int, n: float, n_nn: float, log_sum: float, log_sq: float,
                        log_between: float, share_above: float = 0.05) -> float:
    """The design effect 1 + rho (sum n_i^2 / n - 1) of the share of n values (from `devices` devices) above a
    quantile with `share_above` of the values above it. n_i values of device i, s_i = sum ln x, q_i = sum
    (ln x)^2: log_sum = sum s_i, log_sq = sum q_i, log_between = sum s_i^2 / n_i. The intraclass correlation of
    ln x by device is the one-way ANOVA estimate (Donner 1986, "A review of inference procedures for the
    intraclass correlation coefficient in the one-way random effects model"); rho, that of the exceedance
    indicator, follows from it under a Gaussian latent model (ln x normal within and between devices) by the
    bivariate normal orthant probability (exceedance_correlation). One device: its values are counted as
    fully correlated (sum n_i^2 / n)."""
    if n <= 0:
        return math.nan
    cluster = n_nn / n  # the design effect of fully correlated values
    if devices < 2:
        return cluster
    if n <= devices:  # one value per device: nothing to correlate
        return 1.0
    within = max(0.0, log_sq - log_between) / (n - devices)
    between = max(0.0, log_between - log_sum * log_sum / n) / (devices - 1)
    n0 = (n - n_nn / n) / (devices - 1)
    device_var = max(0.0, (between - within) / n0)
    latent = device_var / (device_var + within) if device_var + within > 0 else 1.0
    return 1 + exceedance_correlation(latent, share_above) * (cluster - 1)


def exceedance_correlation(latent: float, share_above: float) -> float:
    """The correlation of 1{X > h} and 1{Y > h} for standard bivariate normal X, Y with correlation `latent`
    >= 0 and P(X > h) = share_above: (P(X > h, Y > h) - q^2) / (q (1 - q)), where the orthant probability's
    excess over independence is (1 / 2 pi) int_0^asin(latent) exp(-h^2 / (1 + sin t)) dt (Plackett 1954's
    derivative of the bivariate normal in its correlation, substituted r = sin t); Simpson's rule on 64
    intervals (the integrand is smooth and bounded)."""
    q = share_above
    if latent <= 0:
        return 0.0
    if latent >= 1:
        return 1.0
    h = _N.inv_cdf(1 - q)
    top = math.asin(latent)
    f = [math.exp(-h * h / (1 + math.sin(top * i / 64))) for i in range(65)]
    integral = top / 64 / 3 * (f[0] + f[64] + 4 * sum(f[1:64:2]) + 2 * sum(f[2:64:2]))
    return float(min(1.0, integral / (2 * math.pi) / (q * (1 - q))))


def hall_sheather(n: float, p: float, confidence: float) -> float:
    """Hall & Sheather (1988) bandwidth for the sparsity function at the p-quantile."""
    x = _N.inv_cdf(p)
    z = z_two_sided(confidence)
    return n ** (-1 / 3) * z ** (2 / 3) * (1.5 * _N.pdf(x) ** 2 / (2 * x * x + 1)) ** (1 / 3)


def grid_value(grid_values: Sequence[float], fraction: float) -> float:
    """The grid's value at the grid fraction nearest to `fraction`."""
    i = min(range(len(QUANTILE_GRID)), key=lambda j: abs(QUANTILE_GRID[j] - fraction))
    return float(grid_values[i])


# ------------------------------------------------------------------ multiplicity


def _finite_ascending(p_values: dict[Hashable, float]) -> list[tuple[Hashable, float]]:
    """The (key, p) with a finite p, smallest first: NaN (a test that could not be computed) takes no part."""
    return sorted(((k, p) for k, p in p_values.items() if isinstance(p, float | int) and math.isfinite(p)),
                  key=lambda kv: kv[1])


def holm(p_values: dict[Hashable, float], alpha: float) -> set[Hashable]:
    """Keys whose null hypothesis Holm's procedure rejects at family-wise level alpha.
    NaN (a test that could not be computed) is never rejected and does not count in m."""
    ordered = _finite_ascending(p_values)
    rejected: set[Hashable] = set()
    m = len(ordered)
    for i, (key, p) in enumerate(ordered):
        if p > alpha / (m - i):
            break
        rejected.add(key)
    return rejected


def benjamini_hochberg(p_values: dict[Hashable, float], alpha: float) -> set[Hashable]:
    """Keys the Benjamini-Hochberg (1995) step-up procedure rejects at false discovery rate alpha: the k
    smallest p-values, k the largest rank with p_(k) <= k alpha / m. NaN never rejects and does not count."""
    ordered = _finite_ascending(p_values)
    m = len(ordered)
    last = max((i + 1 for i, (_, p) in enumerate(ordered) if p <= (i + 1) * alpha / m), default=0)
    return {key for key, _ in ordered[:last]}


def bh_levels(p_values: dict[Hashable, float], alpha: float) -> dict[Hashable, float]:
    """The level each finite p-value is compared with under Benjamini-Hochberg: the largest rejected rank's
    k alpha / m for the rejected ones, its own rank's for the rest; tied p-values share the level of the first
    of them, whatever order they sort in. A key is rejected exactly when its p is at most its level."""
    ordered = _finite_ascending(p_values)
    m = len(ordered)
    rejected = benjamini_hochberg(p_values, alpha)
    top = len(rejected) * alpha / m if rejected else 0.0
    return _tied_alike(ordered, [top if key in rejected else (i + 1) * alpha / m
                                 for i, (key, _) in enumerate(ordered)])


def holm_levels(p_values: dict[Hashable, float], alpha: float) -> dict[Hashable, float]:
    """The level Holm compared each finite p-value with: alpha / (m - i) at its rank while the procedure runs;
    a p-value it never reached (it stopped at a smaller one) has the level it stopped at, and tied p-values
    share the level of the first of them. So a key is rejected exactly when its p is at most its level, and an
    interval drawn at that level never contradicts the decision."""
    ordered = _finite_ascending(p_values)
    m, levels, stopped = len(ordered), [], None
    for i, (_, p) in enumerate(ordered):
        level = stopped if stopped is not None else alpha / (m - i)
        if stopped is None and p > level:
            stopped = level
        levels.append(level)
    return _tied_alike(ordered, levels)


def _tied_alike(ordered: list[tuple[Hashable, float]], levels: list[float]) -> dict[Hashable, float]:
    """levels by key, each run of equal p-values given the level of its first."""
    out: dict[Hashable, float] = {}
    for i, (key, p) in enumerate(ordered):
        out[key] = out[ordered[i - 1][0]] if i and p == ordered[i - 1][1] else levels[i]
    return out


# ------------------------------------------------------------------ sizing


def _ratio_per_unit(p_cloud: float, tolerance: float, delta: float, deff_edge: float, deff_cloud: float,
                    cloud_share: float) -> tuple[float, float, float] | None:
    """Per edge unit, at a true relative loss of tolerance + delta: the score's mean gap theta p_cloud - p_edge,
    its variance under the null (v0, at the Farrington-Manning restricted MLE of the expected counts) and
    under the alternative (v1), each arm's binomial variance times its design effect."""
    theta = 1 - tolerance
    p2, p1 = p_cloud, p_cloud * (1 - tolerance - delta)
    if not 0 < p2 < 1 or p1 <= 0 or cloud_share <= 0:
        return None
    r1, r2 = fm_restricted(p1, 1.0, p2 * cloud_share, cloud_share, theta)
    v0 = deff_edge * r1 * (1 - r1) + theta**2 * deff_cloud * r2 * (1 - r2) / cloud_share
    v1 = deff_edge * p1 * (1 - p1) + theta**2 * deff_cloud * p2 * (1 - p2) / cloud_share
    return theta * p2 - p1, v0, v1


def units_needed_ratio(p_cloud: float, tolerance: float, delta: float, alpha: float, power: float,
                       deff_edge: float, deff_cloud: float, cloud_share: float, tau: float,
                       sequential: bool, limit: int = 50_000_000) -> int | None:
    """Edge units (rows, or devices under the per_device estimand: whatever the ratio's n counts) for the
    adoption test to reject with probability `power` when the true relative loss is tolerance + delta, at
    the alpha actually spent, with `cloud_share` cloud units per edge unit and the observed design effects.

    The score statistic is standardized by the variance under the null (the Farrington-Manning restricted
    MLE, V0), while its spread under the alternative is V1: the test rejects with probability `power` once
    (gap - z_power sqrt(V1)) / sqrt(V0) reaches the test's boundary (Farrington & Manning 1990, eq. 8; one
    look: n = (z_alpha sqrt(v0) + z_power sqrt(v1))^2 / gap^2 per unit)."""
    per_unit = _ratio_per_unit(p_cloud, tolerance, delta, deff_edge, deff_cloud, cloud_share)
    if per_unit is None:
        return None
    gap, v0, v1 = per_unit
    z_power = _N.inv_cdf(power)

    def enough(n: int) -> bool:
        z = (gap * math.sqrt(n) - z_power * math.sqrt(v1)) / math.sqrt(v0)  # reached with probability `power`
        p = z_p_value(z, v0 / n, tau, sequential)
        return math.isfinite(p) and p <= alpha

    return smallest_n(enough, 16, limit)


def ratio_power(p_cloud: float, tolerance: float, delta: float, alpha: float, deff_edge: float, deff_cloud: float,
                cloud_share: float, tau: float, sequential: bool, n: float) -> float | None:
    """The power `units_needed_ratio` inverts: the chance that the adoption test rejects at `n` edge units when
    the true relative loss is tolerance + delta, Phi((gap sqrt(n) - b sqrt(v0)) / sqrt(v1)) with b the test's
    boundary at alpha (one look: z_alpha; sequential: the mixture SPRT's at variance v0 / n)."""
    per_unit = _ratio_per_unit(p_cloud, tolerance, delta, deff_edge, deff_cloud, cloud_share)
    if per_unit is None or n <= 0:
        return None
    gap, v0, v1 = per_unit
    boundary = z_boundary(v0 / n, tau, alpha, sequential)
    return _N.cdf((gap * math.sqrt(n) - boundary * math.sqrt(v0)) / math.sqrt(v1))


@functools.lru_cache(maxsize=65_536)
def rate_units_needed(p0: float, p1: float, above: bool, alpha: float, power: float, sequential: bool,
                      limit: int = 50_000_000, relative_width: float | None = None) -> int | None:
    """Effective values for the one-sample rate test (`rate_p_value`) to reject with probability `power`
    when the true rate is p1, past p0 on the `above` side: the smallest n whose count at the power
    quantile under p1, n p1 -+ z_power sqrt(n p1 (1 - p1)) (normal approximation), reaches alpha."""
    if not (0 < p0 < 1 and 0 < p1 < 1) or (p1 > p0) != above:
        return None
    z_power = _N.inv_cdf(power)

    def enough(n: int) -> bool:
        spread = z_power * math.sqrt(n * p1 * (1 - p1))
        k = min(float(n), max(0.0, n * p1 - spread if above else n * p1 + spread))
        p = rate_p_value(k, n, p0, above, sequential, relative_width)
        return math.isfinite(p) and p <= alpha

    return smallest_n(enough, 16, limit)


def units_needed_difference(gap: float, unit_variance: float, alpha: float, power: float, tau: float,
                            sequential: bool, limit: int = 50_000_000) -> int | None:
    """Units for the z test of `z_p_value` to reject with probability `power` when the true effect lies
    `gap` past its null, each unit adding `unit_variance` (the effect's variance is unit_variance / n):
    one look, n = (z_alpha + z_power)^2 unit_variance / gap^2."""
    if gap <= 0 or not unit_variance > 0:
        return None
    z_power = _N.inv_cdf(power)

    def enough(n: int) -> bool:
        p = z_p_value(gap * math.sqrt(n / unit_variance) - z_power, unit_variance / n, tau, sequential)
        return math.isfinite(p) and p <= alpha

    return smallest_n(enough, 16, limit)
