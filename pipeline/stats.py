"""The few statistics the gate needs, in plain Python (no SciPy on the gate's path).

- Wilson score interval for rates;
- a distribution-free interval for a quantile from order statistics: the p-th
  quantile of n values lies between the l-th and u-th smallest with
  l, u = n p -/+ z sqrt(n p (1 - p)) (normal approximation to the binomial);
- one-sided z tests for "a rate is beyond its ceiling/floor" and for the edge's
  relative adoption loss against the cloud baseline;
- Holm's step-down correction, so testing many segments at once keeps the
  chance of any false rollback at or below alpha.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from statistics import NormalDist

_N = NormalDist()

# Fractions at which the gate SQL asks DuckDB for quantile_disc; the interval
# bounds are read off this grid, rounded outwards.
QUANTILE_GRID: list[float] = [round(0.80 + i / 1000, 3) for i in range(200)] + [1.0]


def z_two_sided(confidence: float) -> float:
    return _N.inv_cdf(0.5 + confidence / 2)


def wilson(k: int, n: int, confidence: float) -> tuple[float, float] | None:
    if n <= 0:
        return None
    z = z_two_sided(confidence)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def quantile_interval(grid_values: Sequence[float] | None, n: int, p: float,
                      confidence: float) -> tuple[float, float] | None:
    """Bounds for the p-quantile from DuckDB's quantile_disc over QUANTILE_GRID."""
    if not grid_values or n <= 0:
        return None
    z = z_two_sided(confidence)
    spread = z * math.sqrt(n * p * (1 - p))
    lo_frac = max(0.0, math.floor(n * p - spread) / n)
    hi_frac = min(1.0, math.ceil(n * p + spread + 1) / n)
    lo_i = max([i for i, f in enumerate(QUANTILE_GRID) if f <= lo_frac] or [0])
    hi_i = min([i for i, f in enumerate(QUANTILE_GRID) if f >= hi_frac] or [len(QUANTILE_GRID) - 1])
    return float(grid_values[lo_i]), float(grid_values[hi_i])


def _p_upper(z: float) -> float:
    return 1 - _N.cdf(z)


def p_rate_above(k: int, n: int, ceiling: float) -> float:
    """p-value of 'rate <= ceiling' (small p: the rate is above its ceiling)."""
    se = math.sqrt(ceiling * (1 - ceiling) / n)
    if se == 0:
        return 0.0 if k / n > ceiling else 1.0
    return _p_upper((k / n - ceiling) / se)


def p_rate_below(k: int, n: int, floor: float) -> float:
    """p-value of 'rate >= floor' (small p: the rate is below its floor)."""
    se = math.sqrt(floor * (1 - floor) / n)
    if se == 0:
        return 0.0 if k / n < floor else 1.0
    return _p_upper((floor - k / n) / se)


def _var(p: float, n: int) -> float:
    return p * (1 - p) / n


def p_excess_above(k_e: int, n_e: int, k_c: int, n_c: int, margin: float) -> float:
    """p-value of 'edge rate - cloud rate <= margin'."""
    e, c = k_e / n_e, k_c / n_c
    se = math.sqrt(_var(e, n_e) + _var(c, n_c))
    if se == 0:
        return 0.0 if e - c > margin else 1.0
    return _p_upper((e - c - margin) / se)


def p_relative_loss_above(k_e: int, n_e: int, k_c: int, n_c: int, tolerance: float) -> float:
    """p-value of '(cloud - edge) / cloud <= tolerance', i.e. edge >= (1 - tolerance) cloud."""
    e, c = k_e / n_e, k_c / n_c
    se = math.sqrt(_var(e, n_e) + (1 - tolerance) ** 2 * _var(c, n_c))
    gap = (1 - tolerance) * c - e
    if se == 0:
        return 0.0 if gap > 0 else 1.0
    return _p_upper(gap / se)


def relative_loss_interval(k_e: int, n_e: int, k_c: int, n_c: int, confidence: float) -> tuple[float, float] | None:
    """Delta-method interval for (cloud - edge) / cloud."""
    e, c = k_e / n_e, k_c / n_c
    if c == 0:
        return None
    loss = (c - e) / c
    se = math.sqrt(_var(e, n_e) / c**2 + e**2 * _var(c, n_c) / c**4)
    z = z_two_sided(confidence)
    return loss - z * se, loss + z * se


def holm(p_values: dict[Hashable, float], alpha: float) -> set[Hashable]:
    """Keys whose null hypothesis Holm's procedure rejects at family-wise level alpha."""
    rejected: set[Hashable] = set()
    ordered = sorted(p_values.items(), key=lambda kv: kv[1])
    m = len(ordered)
    for i, (key, p) in enumerate(ordered):
        if p > alpha / (m - i):
            break
        rejected.add(key)
    return rejected


def rows_for_rate_difference(p: float, delta: float, confidence: float, power: float = 0.8) -> int | None:
    """Rows per side to detect a drop of `delta` from rate p (one-sided), for the power note."""
    if delta <= 0 or not 0 < p < 1:
        return None
    z_a, z_b = _N.inv_cdf(confidence), _N.inv_cdf(power)
    q = max(1e-9, p - delta)
    return math.ceil((z_a + z_b) ** 2 * (p * (1 - p) + q * (1 - q)) / delta**2)
