"""Power of the weak-network latency test (docs/how-the-gate-decides.md), by simulation.

    .venv/bin/python bench/tail_power.py [--runs 4000]

Edge and cloud latencies are lognormal (log-sd 0.5, weak networks are noisy), independent rows;
the edge p95 is 1.25 x the cloud's (or equal, for the size). Each run computes what the gate
computes from its SQL: quantile_cont p95s, true order statistics on stats.QUANTILE_GRID, the
Hall-Sheather density, Bahadur's variance of log(p95), then the one-sided test: one look at the
contract's 0.05, one look at the gate's share of the budget (0.05 / 7), and the sequential mSPRT
at that share. Prints the rejection rate of each.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from pipeline.gate import stats

GRID = np.array(stats.QUANTILE_GRID)
TAU = math.log(1.25)


def log_p95_and_variance(x: np.ndarray) -> tuple[float, float]:
    x = np.sort(x)
    n = len(x)
    p95 = float(np.quantile(x, 0.95))
    grid = x[np.clip(np.ceil(GRID * n).astype(int) - 1, 0, n - 1)]  # quantile_disc
    h = min(stats.hall_sheather(n, 0.95, 0.95), 0.999 - 0.95, 0.15)
    spread = stats.grid_value(grid, 0.95 + h) - stats.grid_value(grid, 0.95 - h)
    return math.log(p95), 0.95 * 0.05 / n * (spread / (2 * h)) ** 2 / p95**2


def rates(n_edge: int, n_cloud: int, ratio: float, runs: int, rng: np.random.Generator) -> list[float]:
    hits = [0, 0, 0]
    share = 0.05 / 7
    for _ in range(runs):
        le, ve = log_p95_and_variance(ratio * np.exp(0.5 * rng.standard_normal(n_edge)))
        lc, vc = log_p95_and_variance(np.exp(0.5 * rng.standard_normal(n_cloud)))
        var = ve + vc
        z = (le - lc) / math.sqrt(var)
        hits[0] += stats.z_p_value(z, var, TAU, False) <= 0.05
        hits[1] += stats.z_p_value(z, var, TAU, False) <= share
        hits[2] += stats.z_p_value(z, var, TAU, True) <= share
    return [h / runs for h in hits]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4000)
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    print(f"{'edge / cloud values':<20} {'p95 ratio':>9} {'one look 0.05':>14} {'one look 0.0071':>16} "
          f"{'sequential 0.0071':>18}")
    for n_edge, n_cloud in ((200, 150), (1000, 750), (3000, 2000)):
        for ratio in (1.0, 1.25):
            a, b, c = rates(n_edge, n_cloud, ratio, args.runs, rng)
            print(f"{f'{n_edge} / {n_cloud}':<20} {ratio:>9.2f} {a:>14.1%} {b:>16.1%} {c:>18.1%}")


if __name__ == "__main__":
    main()
