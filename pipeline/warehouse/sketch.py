"""The mergeable quantile sketch: a log-bucket histogram (the DDSketch layout), written once in SQL
(sql/rollups/insert_hist_days.sql) so DuckDB and Spark build the same buckets from the same rows.

With relative error e and gamma = (1 + e) / (1 - e), a value x > 0 falls in bucket
k = 1,000,000 + ceil(ln x / ln gamma), which holds (gamma^(j-1), gamma^j] for j = k - 1,000,000; negative
values mirror it below 0, and |x| <= 1e-9 is bucket 0. Sorting buckets sorts values. The bucket's value
2 gamma^j / (gamma + 1) is within e of every value in it, relatively.

A day's histogram is counts per bucket; a window's is the sum of its days' (they merge exactly, which daily
p95s do not: averaging them was off by 4-15 % here, their maximum by up to 60 %). A quantile is read as
DuckDB's quantile_cont reads sorted values: the values at ranks floor(h) and ceil(h), h = (n - 1) p,
interpolated; each is its bucket's value, so the estimate is within e (relatively) of the exact one, at any
size, for about ln(max/min) / (2e) buckets per figure and group (~460 for a 10x range at e = 0.005).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

OFFSET = 1_000_000  # keeps every positive bucket above 0 down to 1e-9
ZERO = 1e-9


def gamma(relative_error: float) -> float:
    return (1 + relative_error) / (1 - relative_error)


def log_gamma(relative_error: float) -> float:
    return math.log(gamma(relative_error))


def bucket_values(buckets: np.ndarray, relative_error: float) -> np.ndarray:
    """The value each bucket stands for (within `relative_error` of all it holds)."""
    g = gamma(relative_error)
    b = np.asarray(buckets, dtype=np.int64)
    j = np.abs(b) - OFFSET
    mag = 2.0 * np.power(g, j.astype(np.float64)) / (g + 1)
    return np.where(b == 0, 0.0, np.sign(b) * mag)


def bucket_of(x: float, relative_error: float) -> int:
    """The bucket of one value, as the SQL computes it (for tests)."""
    lg = log_gamma(relative_error)
    if x > ZERO:
        return OFFSET + math.ceil(math.log(x) / lg)
    if x < -ZERO:
        return -OFFSET - math.ceil(math.log(-x) / lg)
    return 0


def _sorted(buckets: Sequence[int], counts: Sequence[int],
            relative_error: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(value of each bucket, cumulative count) in bucket order; rank r (0-based) is in bucket i when
    ends[i-1] <= r < ends[i]. None when the histogram is empty."""
    b = np.asarray(buckets, dtype=np.int64)
    c = np.asarray(counts, dtype=np.int64)
    if c.sum() == 0:
        return None
    order = np.argsort(b)
    return bucket_values(b[order], relative_error), np.cumsum(c[order])


def quantiles(buckets: Sequence[int], counts: Sequence[int], fractions: Sequence[float],
              relative_error: float) -> list[float] | None:
    """quantile_cont at each fraction from one histogram (buckets in any order); None when it is empty."""
    sorted_ = _sorted(buckets, counts, relative_error)
    return None if sorted_ is None else quantiles_of(*sorted_, fractions)


def quantiles_of(values: np.ndarray, ends: np.ndarray, fractions: Sequence[float]) -> list[float]:
    """quantile_cont at each fraction from a histogram in bucket order: each bucket's value and the cumulative
    count at its end (as _sorted gives them; not empty)."""
    n = int(ends[-1])
    h = (n - 1) * np.asarray(fractions, dtype=np.float64)
    lo, hi = np.floor(h), np.ceil(h)
    v_lo = values[np.searchsorted(ends, lo, side="right")]
    v_hi = values[np.searchsorted(ends, hi, side="right")]
    return (v_lo + (h - lo) * (v_hi - v_lo)).tolist()


@functools.lru_cache(maxsize=64)
def _as_decimals(fractions: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each fraction as DuckDB reads it, the decimal its shortest repr writes, as exact ratios of integers
    (numerators, denominators): a grid is read the same way for every histogram."""
    exact = [Fraction(repr(float(f))) for f in fractions]
    return (np.array([x.numerator for x in exact], dtype=np.int64),
            np.array([x.denominator for x in exact], dtype=np.int64))


def order_statistics(buckets: Sequence[int], counts: Sequence[int], fractions: Sequence[float],
                     relative_error: float) -> list[float] | None:
    """quantile_disc at each fraction from one histogram: the value of the k-th smallest, k = max(1, ceil(n f))
    (DuckDB reads f as a decimal, so 0.81 x 300 is 243, not 244); None when the histogram is empty."""
    sorted_ = _sorted(buckets, counts, relative_error)
    return None if sorted_ is None else order_statistics_of(*sorted_, fractions)


def order_statistics_of(values: np.ndarray, ends: np.ndarray, fractions: Sequence[float]) -> list[float]:
    """order_statistics from a histogram in bucket order, as quantiles_of takes it."""
    tops, bottoms = _as_decimals(tuple(fractions))
    ks = np.maximum(1, -(-int(ends[-1]) * tops // bottoms))  # exact integer ceilings, as the listed decimals give
    return values[np.searchsorted(ends, ks - 1, side="right")].tolist()


def widen(interval: tuple[float | None, float | None] | None,
          relative_error: float) -> tuple[float | None, float | None] | None:
    """An interval read off the sketch's quantiles, widened by the sketch's error: a bound b within e of the exact
    one, b*, has |b - b*| <= e |b*| <= e / (1 - e) |b|, so moving each bound away by that much still covers what
    exact order statistics would give."""
    if interval is None:
        return None
    lo, hi = interval
    pad = relative_error / (1 - relative_error)
    return (None if lo is None else lo - abs(lo) * pad), (None if hi is None else hi + abs(hi) * pad)
