"""Power of the weak-network latency test (docs/how-the-gate-decides.md), by simulation.

    .venv/bin/python bench/tail_power.py [--runs 4000] [--clustered-runs 2000]

Edge and cloud latencies are lognormal (log-sd 0.5, weak networks are noisy), independent rows;
the edge p95 is 1.25 x the cloud's (or equal, for the size). Each run computes what the gate
computes from its SQL: quantile_cont p95s, true order statistics on stats.QUANTILE_GRID, the
Hall-Sheather density, Bahadur's variance of log(p95), then the one-sided test: one look at the
contract's 0.05, one look at the gate's share of the budget (0.05 / 7), and the sequential mSPRT
at that share. Prints the rejection rate of each.

Then, for devices that differ (ln latency = a normal device effect + normal noise of sd 0.5, requests per
device lognormal), the design effect of the share above the p95 as the gate estimates it
(stats.anova_design_effect: the intraclass correlation of ln latency from the per-device sums the device-day
rollup keeps, turned into the exceedance indicator's by the bivariate normal orthant probability) beside the
indicator's own cluster-robust design effect (what the gate read from raw rows before issue 29) and the true
one (the variance of the share above the true p95 over the runs, over the binomial's).
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


def design_effects(devices: int, device_sd: float, runs: int, rng: np.random.Generator) -> tuple[float, ...]:
    """(true, ANOVA on ln x, indicator cluster-robust) design effects of the share above the p95, averaged."""
    shares, anova, indicator, sizes = [], [], [], []
    total_sd = math.sqrt(device_sd**2 + 0.25)
    threshold = 1.6448536269514722 * total_sd  # the p95 of ln x over requests (devices differ by a normal shift)
    for _ in range(runs):
        n_i = np.maximum(1, np.round(rng.lognormal(1.5, 0.8, devices))).astype(int)
        device = np.repeat(np.arange(devices), n_i)
        logs = np.repeat(device_sd * rng.standard_normal(devices), n_i) + 0.5 * rng.standard_normal(device.size)
        n = device.size
        k_i = np.bincount(device, logs > threshold, devices)
        shares.append(k_i.sum() / n)
        s_i, q_i = np.bincount(device, logs, devices), np.bincount(device, logs**2, devices)
        anova.append(stats.anova_design_effect(devices, n, float((n_i**2).sum()), float(s_i.sum()),
                                               float(q_i.sum()), float((s_i**2 / n_i).sum())))
        indicator.append(float(((k_i - k_i.sum() / n * n_i) ** 2).sum()) / (0.05 * 0.95 * n))
        sizes.append(n)
    true = np.var(shares) / (0.05 * 0.95 / np.mean(sizes))
    return true, float(np.mean(anova)), float(np.mean(indicator))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4000)
    ap.add_argument("--clustered-runs", type=int, default=2000)
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    print(f"{'edge / cloud values':<20} {'p95 ratio':>9} {'one look 0.05':>14} {'one look 0.0071':>16} "
          f"{'sequential 0.0071':>18}")
    for n_edge, n_cloud in ((200, 150), (1000, 750), (3000, 2000)):
        for ratio in (1.0, 1.25):
            a, b, c = rates(n_edge, n_cloud, ratio, args.runs, rng)
            print(f"{f'{n_edge} / {n_cloud}':<20} {ratio:>9.2f} {a:>14.1%} {b:>16.1%} {c:>18.1%}")
    print(f"\n{'devices':>8} {'device sd':>10} {'true deff':>10} {'ANOVA ln x (gate)':>18} {'indicator (before)':>19}")
    for devices in (100, 400):
        for device_sd in (0.0, 0.25, 0.5):
            true, anova, indicator = design_effects(devices, device_sd, args.clustered_runs, rng)
            print(f"{devices:>8} {device_sd:>10.2f} {true:>10.2f} {anova:>18.2f} {indicator:>19.2f}")


if __name__ == "__main__":
    main()
