"""Operating characteristics of kill_rate, the assignment check (sample-ratio mismatch) and retention, by
simulation: docs/operating-characteristics.md's guardrail table is this script's output.

    .venv/bin/python bench/guardrails.py [--runs 400] [--only kill,srm,retention] [--seed 0]

Each release is judged after every one of 14 nights by the gate's own statistics with gates/admission.yaml as
shipped (pipeline.gate.evaluate.judge_sums for kill_rate and retention, with their families' Holm and
gatekeeping and their alpha share; pipeline.gate.assignment.judge for the split), fed the per-device sums their
SQL returns (sql/gate/device_days.sql, retention.sql, assignment_devices.sql), simulated here device by device:
those sums are all the tests see, so a release of a million devices costs seconds.

kill_rate. Edge devices (tier low/mid/high/flagship .25/.40/.25/.10) arrive uniformly over the first 7 days;
each is active on a day with its own probability, Beta(0.6, 0.9) (many rare users, a few daily), and killed on
an active day with its own propensity, Beta(c p, c (1 - p)) around the release's kill rate p (c = 1: a few
phones are killed again and again, as low-RAM phones are; c = 50: kills spread evenly). Each active day falls
in one of the 9 task x network-bucket cells of the device's tier (task .45/.35/.20, bucket normal .85, weak
.11, offline .04): 36 segments. A release at the 1 % ceiling is falsely rolled back when any kill check fails
on any night; at 2 % (twice it) it is caught when any kill check fails by night 7.

SRM. Devices (unit device) arrive over 14 days, each to the cloud hold-back with the declared 20 %, in one of 12
task x tier cells; the telemetry of an edge device is lost with probability 2 % (the loss) or never (A/A). The
release scope and the 12 task x tier scopes are judged each night on the devices seen so far. The loss is
caught when the release scope is flagged by night 7; the A/A is a false alarm when any scope is flagged on any
night.

retention. Devices arrive over the 14 days (20 % held back), each active on a day with its own probability
(Beta(0.6, 0.9)) until it stops using the feature (after a geometric number of days, mean 20). A loss: each edge
device stops after its first day with the probability that lowers the edge arm's share of devices returning 7
or more days after their first (night 14's cohort) by 5 points. Night t judges the devices first seen at least
7 days before it, by day. Caught: the retention check (release-wide or a task x tier's) fails on some night.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pipeline.common.config import load_config
from pipeline.common.registry import GateName
from pipeline.common.vocabulary import TIERS, Status
from pipeline.gate import assignment, stats
from pipeline.gate.evaluate import judge_sums

NIGHTS = 14
TASKS = ("rewrite", "intent", "summarize")
TASK_P = (0.45, 0.35, 0.20)
TIER_P = (0.25, 0.40, 0.25, 0.10)
BUCKETS = ("normal", "weak", "offline")
BUCKET_P = (0.85, 0.11, 0.04)
CELL_P = np.outer(TASK_P, BUCKET_P).ravel()  # task x bucket
ACTIVE = (0.6, 0.9)  # Beta of a device's chance to be active on a day


def _wilson(k: int, n: int) -> str:
    lo, hi = stats.wilson(k, n, 0.95) or (0.0, 0.0)
    return f"{k}/{n} ({k / n:.1%}) [{lo:.1%}, {hi:.1%}]"


def _sums(days: np.ndarray, k: np.ndarray) -> dict[str, float]:
    """One device_days.sql row from per-device days and kill days (devices with days only)."""
    m = days > 0
    d, x = days[m].astype(float), k[m].astype(float)
    return {"devices": int(m.sum()), "days": d.sum(), "days_nn": (d * d).sum(), "kill_days": x.sum(),
            "kill_days_kk": (x * x).sum(), "kill_days_kn": (x * d).sum()}


def kill_release(seed: int, devices: int, p: float, c: float, config, nights: int) -> int | None:
    """The first night on which any kill check fails (None: none did)."""
    rng = np.random.default_rng(seed)
    tier = rng.choice(4, devices, p=TIER_P)
    arrive = rng.integers(0, 7, devices)
    active = rng.random((devices, NIGHTS)) < rng.beta(*ACTIVE, devices)[:, None]
    active &= np.arange(NIGHTS)[None, :] >= arrive[:, None]
    active[np.arange(devices), arrive] = True
    killed = active & (rng.random((devices, NIGHTS)) < rng.beta(c * p, c * (1 - p), devices)[:, None])
    segment = tier[:, None] * 9 + rng.choice(9, (devices, NIGHTS), p=CELL_P)
    keys = [(TASKS[cell // 3], TIERS[t], BUCKETS[cell % 3]) for t in range(4) for cell in range(9)]
    who = np.broadcast_to(np.arange(devices)[:, None], (devices, NIGHTS))
    for night in range(1, nights + 1):
        a, k, s, w = active[:, :night], killed[:, :night], segment[:, :night], who[:, :night]
        rows = {(): _sums(a.sum(1), k.sum(1))}
        for t, name in enumerate(TIERS):  # kill_rate is judged over the device tier (sql/gate/device_days.sql)
            rows[("*", name, "*")] = _sums(a.sum(1)[tier == t], k.sum(1)[tier == t])
        flat = (s * devices + w)[a]
        per_days = np.bincount(flat, minlength=36 * devices).reshape(36, devices)
        per_kills = np.bincount((s * devices + w)[k], minlength=36 * devices).reshape(36, devices)
        for i, key in enumerate(keys):  # the segments: each reads its tier's device-days
            if per_days[i].any():
                rows[key] = _sums(per_days[i], per_kills[i])
        checks = judge_sums(config, device_days=rows)
        if any(ch.status == Status.FAIL for ch in checks if ch.gate == GateName.KILL_RATE):
            return night
    return None


def kill_table(config, runs: int, seed: int) -> None:
    print("kill_rate: share of releases with a kill check failing (a false rollback at the 1 % ceiling on any of 14 "
          "nights; twice the ceiling caught by night 7), [95 % Wilson]\n")
    print("| edge devices | kills spread c | at the ceiling: falsely rolled back | 2 x ceiling: caught by night 7 |"
          " median night caught |")
    print("|---|---|---|---|---|")
    for devices in (1_500, 3_000, 6_000):
        for c in (1.0, 5.0, 50.0):
            started = time.time()
            null = [kill_release(seed + i, devices, 0.01, c, config, NIGHTS) for i in range(runs)]
            alt = [kill_release(10**6 + seed + i, devices, 0.02, c, config, 7) for i in range(runs)]
            caught = [n for n in alt if n is not None]
            median = f"{int(np.median(caught))}" if caught else "–"
            print(f"| {devices:,} | {c:g} | {_wilson(sum(n is not None for n in null), runs)} | "
                  f"{_wilson(len(caught), runs)} | {median} |  ({time.time() - started:.0f} s)", flush=True)


def srm_release(seed: int, devices_by_7: int, loss: float, config, scopes: bool) -> int | None:
    """The first night on which the split is flagged (None: never): the release scope, and with `scopes` the 12
    task x tier scopes too."""
    rng = np.random.default_rng(seed)
    a = config.assignment
    c = stats.srm_concentration(a.holdback_share, a.min_deviation)
    cells = np.outer(TASK_P, TIER_P).ravel()
    cloud, edge = np.zeros(12, dtype=np.int64), np.zeros(12, dtype=np.int64)
    for night in range(1, NIGHTS + 1):
        new = rng.multinomial(rng.poisson(devices_by_7 / 7), cells)
        held = rng.binomial(new, a.holdback_share)
        cloud += held
        edge += rng.binomial(new - held, 1 - loss)
        judged = [assignment.judge({"cloud": cloud.sum(), "edge": edge.sum(), "both_arms": 0}, "release",
                                   a.max_p_value, config, c)]
        if scopes:
            judged += [assignment.judge({"cloud": cloud[i], "edge": edge[i], "both_arms": 0}, str(i),
                                        a.max_p_value / 12, config, c) for i in range(12)]
        if any(s.flagged for s in judged):
            return night
    return None


def srm_table(config, runs: int, seed: int) -> None:
    a = config.assignment
    print(f"\nassignment check (unit device, hold-back {a.holdback_share:.0%} declared, max_p_value {a.max_p_value:g}, "
          f"min_deviation {a.min_deviation:g}): [95 % Wilson]\n")
    print("| devices by night 7 | A/A: flagged on some night (any scope) | 2 % of edge devices lost: flagged by "
          "night 7 | by night 14 |")
    print("|---|---|---|---|")
    for devices in (50_000, 100_000, 200_000, 400_000, 800_000):
        started = time.time()
        null = [srm_release(seed + i, devices, 0.0, config, True) for i in range(runs)]
        alt = [srm_release(10**6 + seed + i, devices, 0.02, config, False) for i in range(runs)]
        print(f"| {devices:,} | {_wilson(sum(n is not None for n in null), runs)} | "
              f"{_wilson(sum(n is not None and n <= 7 for n in alt), runs)} | "
              f"{_wilson(sum(n is not None for n in alt), runs)} |  ({time.time() - started:.0f} s)", flush=True)


def retention_release(seed: int, devices: int, churn: float, config) -> tuple[int | None, float, float]:
    """(first night a retention check fails or None, night 14's edge and cloud share returning)."""
    rng = np.random.default_rng(seed)
    arrive = rng.integers(0, NIGHTS, devices)
    held = rng.random(devices) < config.assignment.holdback_share
    stop = arrive + 1 + rng.geometric(1 / 20, devices)
    stop = np.where(~held & (rng.random(devices) < churn), arrive + 1, stop)
    day = np.arange(NIGHTS)[None, :]
    active = (rng.random((devices, NIGHTS)) < rng.beta(*ACTIVE, devices)[:, None]) & (day < stop[:, None])
    active &= day >= arrive[:, None]
    active[np.arange(devices), arrive] = True
    later = active & (day >= arrive[:, None] + config.gates.retention.horizon_days)
    cell = rng.choice(12, devices, p=np.outer(TASK_P, TIER_P).ravel())
    keys = [(TASKS[i // 4], TIERS[i % 4]) for i in range(12)]
    horizon = int(config.gates.retention.horizon_days)
    first = None
    shares = (0.0, 0.0)
    for night in range(horizon + 1, NIGHTS + 1):
        cohort = arrive <= night - 1 - horizon
        returned = cohort & later[:, :night].any(1)
        rows: dict[tuple, dict[str, int]] = {}
        for side, on in (("edge", ~held), ("cloud", held)):
            rows[(side, ())] = {"devices": int((cohort & on).sum()), "returned": int((returned & on).sum())}
            for i, key in enumerate(keys):
                here = on & (cell == i)
                rows[(side, key)] = {"devices": int((cohort & here).sum()), "returned": int((returned & here).sum())}
        if first is None and any(ch.status == Status.FAIL for ch in judge_sums(config, returning=rows)):
            first = night
        shares = tuple(rows[(s, ())]["returned"] / max(1, rows[(s, ())]["devices"]) for s in ("edge", "cloud"))
    return first, shares[0], shares[1]


def retention_table(config, runs: int, seed: int) -> None:
    pilot = [retention_release(seed + 10**7 + i, 20_000, 0.0, config)[1:] for i in range(5)]
    base = float(np.mean([e for e, _ in pilot]))
    churn = 0.05 / base
    horizon = config.gates.retention.horizon_days
    print(f"\nretention (device-level hold-back; a device returns with a request {horizon:g}+ days after its first;"
          f" max_drop {config.gates.retention.max_drop:g}, mode as shipped: "
          f"{config.gates.retention.mode}): A/A share returning on night 14 {base:.1%}, so {churn:.1%} of edge "
          f"devices churning after their first day is a 5-point drop. [95 % Wilson]\n")
    print("| devices by night 14 | A/A: flagged on some night | 5-point drop: caught on some night | measured drop "
          "on night 14 (mean) |")
    print("|---|---|---|---|")
    for devices in (5_000, 10_000, 20_000, 40_000):
        started = time.time()
        null = [retention_release(seed + i, devices, 0.0, config) for i in range(runs)]
        alt = [retention_release(10**6 + seed + i, devices, churn, config) for i in range(runs)]
        drop = float(np.mean([c - e for _, e, c in alt]))
        print(f"| {devices:,} | {_wilson(sum(n is not None for n, *_ in null), runs)} | "
              f"{_wilson(sum(n is not None for n, *_ in alt), runs)} | {drop * 100:.1f} points |  "
              f"({time.time() - started:.0f} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--only", default="kill,srm,retention")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    config = load_config(None)
    only = set(args.only.split(","))
    if "kill" in only:
        kill_table(config, args.runs, args.seed)
    if "srm" in only:
        srm_table(config, args.runs, args.seed)
    if "retention" in only:
        retention_table(config, args.runs, args.seed)


if __name__ == "__main__":
    main()
