"""Operating characteristics of the shipped gate over the heterogeneity family (docs/operating-characteristics.md),
by simulation: that page's table is this script's output.

    .venv/bin/python bench/power.py [--runs 20] [--jobs 2] [--points all|N,...] [--json out.json]
    .venv/bin/python bench/power.py --p95 [--runs 10] [--jobs 2]
    .venv/bin/python bench/power.py --other-gates [--runs 10] [--jobs 2]
    .venv/bin/python bench/power.py --devices-check [--runs 300] [--jobs 2] [--points 1,5]

Each grid point is a population of `pipeline simulate` (simulate.Population): per-device adoption propensity
Beta(c p, c (1 - p)) around the task's rate, Pareto or lognormal activity, 0.2 % chatty devices (30 x activity),
a per-device cloud hold-back, devices arriving over the first 7 days. Each release is about 4,300 rows a night
for 14 nights, judged after every night with gates/admission.yaml as shipped and the rollout policy. Effects:
A/A (edge outcomes drawn as the cloud's), an adoption loss at the 3 % tolerance, 10 % and 15 % (relative, every
user alike). Printed per point: edge and cloud devices, the top 1 % / 10 % devices' share of rows, then per
effect the releases rolled back on some night (by night 7 for the 15 % loss), with a 95 % Wilson interval, and
for the 15 % loss the median `devices_to_detect` of the release-wide quality check on night 7 ("needs N": edge
devices for 80 % power against a loss of twice the tolerance, at the alpha the check had).

--other-gates: the same grid, for fallback_rate (edge fallbacks up by 5 points, its tolerance over the cloud,
and by 10) and failure_detectability (10 % and 20 % of the detected edge failures made silent: a detected
share of 0.90, its threshold, and 0.80), each regression drawn per device from a Beta around its mean with
the point's concentration: the releases rolled back on some night, and by the gate the regression targets.

--devices-check: does `devices_to_detect` deliver the power it states? Per point, a pilot of 20 releases with
a loss of twice the tolerance (6 %) gives the median `devices_to_detect` of the release-wide quality check on
night 7; the population is then scaled (devices and rows alike) so that about that many edge devices are
present on night 7, and `--runs` releases of it are judged on nights 1-7. Printed: the share in which the
night-7 look of the release-wide check rejects, the devices it stated there, the power the same formula states
for each release at the devices it has (stats.ratio_power: its mean, which the share caught should match, and
the releases caught by band of stated power). The statement is per release
(its own design effect and cloud share), so the last column is the one to hold to 80 %: the releases whose
own devices_to_detect lies within 5 % of the devices they have. Over all releases the share falls below 80 %
where releases differ much in their variance: power is concave near 80 %, so the under-sized ones lose more
than the over-sized ones gain.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from dataclasses import dataclass

import numpy as np

from pipeline.common.config import load_config
from pipeline.gate import stats
from pipeline.planning.backtest import SWEEPS, Sweep, merge, run_sweep
from pipeline.planning.simulate import Population, generate

ROWS = 60_000  # ~4,300 a night over 14 nights
NIGHTS = 14


@dataclass(frozen=True)
class Point:
    name: str
    population: Population


def _pop(devices: int, concentration: float, pareto: float = 0.0, sigma: float = 0.7, holdback: float = 0.2):
    return Population(devices=devices, adoption_concentration=concentration, activity_pareto=pareto,
                      activity_sigma=sigma, chatty_share=0.002, holdback_share=holdback, arrival_days=7)


GRID: tuple[Point, ...] = (
    Point("grey release: c 5, Pareto 1.3, 2,400 devices, hold-back 20 %", _pop(2400, 5, pareto=1.3)),
    Point("most dispersed: c 1, Pareto 1.1, 2,000 devices, hold-back 10 %", _pop(2000, 1, pareto=1.1, holdback=0.1)),
    Point("homogeneous users, heavy tail: c 50, Pareto 1.1, 2,000, 10 %", _pop(2000, 50, pareto=1.1, holdback=0.1)),
    Point("lognormal sigma 2: c 1, 2,000 devices, hold-back 20 %", _pop(2000, 1, sigma=2.0)),
    Point("light tail: c 50, Pareto 3, 2,000 devices, hold-back 30 %", _pop(2000, 50, pareto=3.0, holdback=0.3)),
    Point("many devices: c 1, Pareto 1.1, 6,000 devices, hold-back 30 %", _pop(6000, 1, pareto=1.1, holdback=0.3)),
    Point("small: c 5, Pareto 1.3, 400 devices, hold-back 20 %", _pop(400, 5, pareto=1.3)),
)
EFFECTS = (("A/A", 0.0), ("loss 3 % (the tolerance)", 0.03), ("loss 10 %", 0.10), ("loss 15 %", 0.15))


def shape(pop: Population) -> dict[str, float]:
    """Edge and cloud devices and the activity concentration of one release of this population."""
    t = generate("4.12", ROWS, "aa", seed=0, days=NIGHTS, population=pop)
    ids = np.asarray(t["device_id"].to_pylist())
    cloud = np.asarray(t["route"].to_pylist()) == "cloud"
    _, counts = np.unique(ids, return_counts=True)
    counts = np.sort(counts)[::-1]
    top = lambda share: counts[: max(1, len(counts) * share // 100)].sum() / counts.sum()  # noqa: E731
    return {"edge_devices": len(np.unique(ids[~cloud])), "cloud_devices": len(np.unique(ids[cloud])),
            "top_1pct_rows": float(top(1)), "top_10pct_rows": float(top(10))}


def p95_sweeps(config, runs: int, jobs: int) -> None:
    sweeps = [s for s in SWEEPS if s.p95_factor is not None]
    tasks = [(s, seed, config, NIGHTS) for s in sweeps for seed in range(runs)]
    started = time.time()
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        done = pool.starmap(run_sweep, tasks, chunksize=1)
    print(f"{runs} releases per sweep, {NIGHTS} nightly looks each; {time.time() - started:.0f} s\n")
    print("| true p95 | releases rolled back | failing looks, all sizes | failing looks, 400-700 values |")
    print("|---|---|---|---|")
    for i, s in enumerate(sweeps):
        r = merge(done[i * runs:(i + 1) * runs])
        print(f"| {s.name.removeprefix('latency p95 ')} | {r.ever}/{r.runs} | {r.looks_failed / max(1, r.looks):.1%} "
              f"of {r.looks:,} | {r.near_500_failed / max(1, r.near_500):.1%} of {r.near_500:,} |")


OTHER_EFFECTS = (("A/A", {}, ""), ("fallback +5 pts (the tolerance)", {"fallback_spike": 0.05}, "fallback_rate"),
                 ("fallback +10 pts", {"fallback_spike": 0.10}, "fallback_rate"),
                 ("silent 10 % (detected 0.90, the threshold)", {"silent_share": 0.10}, "failure_detectability"),
                 ("silent 20 % (detected 0.80)", {"silent_share": 0.20}, "failure_detectability"))


def _run(tasks: list, jobs: int) -> list:
    if jobs > 1:
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            return pool.starmap(run_sweep, tasks, chunksize=1)
    return [run_sweep(*t) for t in tasks]


def other_gates(config, points: tuple[Point, ...], runs: int, jobs: int) -> None:
    sweeps = [Sweep(f"{p.name} | {label}", "aa", ROWS, population=p.population, **knobs)
              for p in points for label, knobs, _ in OTHER_EFFECTS]
    started = time.time()
    done = _run([(sw, seed, config, NIGHTS) for sw in sweeps for seed in range(runs)], jobs)
    print(f"{runs} releases per cell, {NIGHTS} nightly looks each, gates/admission.yaml as shipped; "
          f"{time.time() - started:.0f} s. A cell: releases rolled back on some night (by the targeted gate)\n")
    print("| population | " + " | ".join(label for label, _, _ in OTHER_EFFECTS) + " |")
    print("|---" * (len(OTHER_EFFECTS) + 1) + "|")
    for i, p in enumerate(points):
        cells = []
        for j, (_, _, gate) in enumerate(OTHER_EFFECTS):
            at = (i * len(OTHER_EFFECTS) + j) * runs
            total = merge(done[at:at + runs])
            lo, hi = stats.wilson(total.ever, total.runs, 0.95) or (0, 0)
            by_gate = f" ({total.by_gate.get(gate, 0)})" if gate else ""
            cells.append(f"{total.ever}/{total.runs}{by_gate} [{lo:.0%}, {hi:.0%}]")
        print(f"| {p.name} | " + " | ".join(cells) + " |")


CHECK_LOSS = 0.06  # twice the shipped quality tolerance of 3 %
CHECK_NIGHTS = 7


def night_7_quality(population: Population, rows: int, seed: int, config) -> tuple[int, int, bool, float]:
    """One release judged on nights 1-7: the release-wide quality check's devices present, its stated
    devices_to_detect, whether it rejected, and the power the same formula gives its test at the devices it
    has (stats.ratio_power), on night 7."""
    from pipeline.planning.backtest import simulated_rollout

    looks = simulated_rollout("aa", rows, seed, config, CHECK_NIGHTS, population, CHECK_LOSS)
    check = looks[-1].result.release_wide["quality_loss"]
    test = check.tests.get("")
    x = check.extra
    tau = 2 * check.threshold * check.baseline
    power = stats.ratio_power(check.baseline, check.threshold, check.threshold, test.alpha, check.design_effect,
                              x["cloud_design_effect"], x["cloud_units"] / x["edge_units"], tau,
                              config.statistics.method == "sequential", x["edge_units"])
    return check.devices or 0, int(x.get("devices_to_detect") or 0), bool(test and test.rejected), power or 0.0


def _night_7(tasks: list, jobs: int) -> list:
    if jobs > 1:
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            return pool.starmap(night_7_quality, tasks, chunksize=1)
    return [night_7_quality(*t) for t in tasks]


def devices_check(config, points: tuple[Point, ...], runs: int, jobs: int, pilot: int = 20) -> None:
    from dataclasses import replace

    rows = ROWS * CHECK_NIGHTS // NIGHTS  # the grid's rows a night
    print(f"loss {CHECK_LOSS:.0%} (twice the tolerance), night-7 look of the release-wide quality check, "
          f"gates/admission.yaml as shipped; pilot {pilot} releases, then {runs} at the stated size\n")
    print("| population | pilot: edge devices, median needed | scaled: edge devices, median stated | "
          "rejected on night 7 [95 %] | power stated at the devices present, mean | rejected by stated power | "
          "of them, those whose own statement is within 5 % of their devices |")
    print("|---|---|---|---|---|---|---|")
    for p in points:
        started = time.time()
        first = _night_7([(p.population, rows, 10_000 + s, config) for s in range(pilot)], jobs)
        present, needed = int(np.median([d for d, *_ in first])), int(np.median([n for _, n, *_ in first]))
        scale = needed / present
        pop = replace(p.population, devices=round(p.population.devices * scale))
        done = _night_7([(pop, round(rows * scale), s, config) for s in range(runs)], jobs)
        k = sum(r for _, _, r, _ in done)
        lo, hi = stats.wilson(k, runs, 0.95) or (0, 0)
        # the statement is per release: of the releases whose own devices_to_detect is within 5 % of the
        # devices they have, 80 % should be caught
        near = [r for d, n, r, _ in done if n and abs(d - n) <= 0.05 * n]
        k_near = sum(near)
        lo_n, hi_n = stats.wilson(k_near, len(near), 0.95) or (0, 0)
        stated = float(np.mean([w for *_, w in done]))
        bins = []
        for low, high in ((0, 0.6), (0.6, 0.75), (0.75, 0.85), (0.85, 1.01)):
            caught = [r for *_, r, w in done if low <= w < high]
            if caught:
                bins.append(f"{low:.2f}-{min(high, 1):.2f}: {sum(caught)}/{len(caught)}")
        print(f"| {p.name} | {present:,}, {needed:,} | {int(np.median([d for d, *_ in done])):,}, "
              f"{int(np.median([n for _, n, *_ in done])):,} | {k}/{runs} ({k / runs:.1%}) [{lo:.1%}, {hi:.1%}] | "
              f"{stated:.1%} | {'; '.join(bins)} | "
              f"{k_near}/{len(near)} ({k_near / max(1, len(near)):.1%}) [{lo_n:.1%}, {hi_n:.1%}] |  "
              f"({time.time() - started:.0f} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--points", default="all", help="comma-separated point numbers (1-based), or all")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--p95", action="store_true",
                    help="instead, the p95 budget sweeps of `pipeline backtest --simulated` (true p95 at 1 and 1.2 x "
                         "the budget, independent and device-clustered): the share of segment looks that fail")
    ap.add_argument("--other-gates", action="store_true",
                    help="instead, fallback_rate and failure_detectability regressions on the grid (see above)")
    ap.add_argument("--devices-check", action="store_true",
                    help="instead, whether devices_to_detect delivers its stated 80 %% power (see above)")
    args = ap.parse_args()
    config = load_config(None)
    if args.p95:
        p95_sweeps(config, args.runs, args.jobs)
        return
    points = GRID if args.points == "all" else tuple(GRID[int(i) - 1] for i in args.points.split(","))
    if args.other_gates:
        other_gates(config, points, args.runs, args.jobs)
        return
    if args.devices_check:
        devices_check(config, points, args.runs, args.jobs)
        return
    sweeps = [Sweep(f"{p.name} | {label}", "aa", ROWS, loss=loss, population=p.population)
              for p in points for label, loss in EFFECTS]
    tasks = [(sw, seed, config, NIGHTS) for sw in sweeps for seed in range(args.runs)]
    started = time.time()
    done = _run(tasks, args.jobs)
    out = []
    print(f"{args.runs} releases per cell, {NIGHTS} nightly looks each, gates/admission.yaml as shipped "
          f"(estimand {config.statistics.estimand}, method {config.statistics.method}); "
          f"{time.time() - started:.0f} s\n")
    print("| population | edge / cloud devices | top 1 % / 10 % of rows | A/A rolled back | loss 3 % rolled back "
          "| loss 10 % by night 14 | loss 15 % by night 7 |")
    print("|---|---|---|---|---|---|---|")
    for i, p in enumerate(points):
        sh = shape(p.population)
        cells = []
        for j, (label, loss) in enumerate(EFFECTS):
            rs = [r for r in done[(i * len(EFFECTS) + j) * args.runs:(i * len(EFFECTS) + j + 1) * args.runs]]
            k = sum(r.by_night_7 for r in rs) if loss == 0.15 else sum(r.ever for r in rs)
            lo, hi = stats.wilson(k, len(rs), 0.95) or (0, 0)
            needed = [n for r in rs for n in r.devices_to_detect]
            sized = f"; needs {int(np.median(needed)):,}" if loss == 0.15 and needed else ""
            cells.append(f"{k}/{len(rs)} [{lo:.0%}, {hi:.0%}]{sized}")
            out.append({"point": p.name, "effect": label, "loss": loss, "runs": len(rs), "rolled_back": k,
                        "interval_95": [lo, hi], **sh,
                        "first_nights": [n for r in rs for n in r.first_nights]})
        print(f"| {p.name} | {sh['edge_devices']:,} / {sh['cloud_devices']:,} | "
              f"{sh['top_1pct_rows']:.0%} / {sh['top_10pct_rows']:.0%} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
