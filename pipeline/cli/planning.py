"""The planning commands: ledger, backtest, admit and simulate."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.cli.common import (
    _as_of,
    _as_of_option,
    _config,
    _config_option,
    _db_option,
    _emit_json,
    _engine_options,
    _Progress,
    _show,
    _telemetry,
    _warehouse,
)
from pipeline.common.errors import UsageError
from pipeline.common.exit_codes import Exit
from pipeline.common.registry import ESTIMANDS
from pipeline.common.tables import counted


def cmd_ledger(args: argparse.Namespace) -> int:
    from pipeline.planning.ledger import compute_ledger

    config = _config(args)
    for path in args.candidate:
        if not path.is_file():
            raise UsageError(f"--candidate {path}: no such file")
    with _warehouse(args, config, raw=True) as con:  # the field's p95s of a candidate's tiers read raw events
        ledger = compute_ledger(con, args.release, config, as_of=_as_of(args), candidates=args.candidate)
    _show(args, ledger)
    return Exit.OK


def cmd_backtest(args: argparse.Namespace) -> int:
    from pipeline.common import clock
    from pipeline.planning.backtest import backtest, parse_injection

    config = _config(args)
    if args.method:
        config = dataclasses.replace(config, statistics=dataclasses.replace(config.statistics, method=args.method))
    if args.estimand:
        config = dataclasses.replace(config, statistics=dataclasses.replace(config.statistics,
                                                                            estimand=args.estimand))
    if args.runs < 1 or (args.nights is not None and args.nights < 1) or (args.segment_rows or 1) < 1 \
            or args.jobs < 1:
        raise UsageError("--runs, --nights, --segment-rows and --jobs must be >= 1")
    if args.simulated:
        if args.release:
            raise UsageError("--simulated judges simulated releases: leave out --release")
        from pipeline.planning.backtest import SWEEPS, family_sweeps, simulated

        population = _population(args)
        sweeps = family_sweeps(population, args.rows_per_night * (args.nights or 14)) if population else SWEEPS
        _show(args, simulated(config, args.runs, jobs=args.jobs, nights=args.nights or 14, sweeps=sweeps))
        return Exit.OK
    if not args.release:
        raise UsageError("backtest needs --release R (or --simulated)")
    try:
        injections = [parse_injection(s) for s in args.inject] if args.inject else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    as_of = clock.now(_as_of(args))
    with _telemetry(args, config) as source:  # on Spark, the release's rows come from Spark; the replay runs in DuckDB
        result = backtest(source, args.release, config, as_of, nights=args.nights, runs=args.runs,
                          segment_rows=args.segment_rows, injections=injections, seed=args.seed,
                          progress=None if getattr(args, "json", False) else _Progress("replay"))
    _show(args, result)
    return Exit.OK


def _population_options(p: argparse.ArgumentParser, title: str) -> Any:
    """The heterogeneity family's knobs (docs/operating-characteristics.md), for backtest --simulated and simulate."""
    shape = p.add_argument_group(title)
    shape.add_argument("--devices", type=int, help="devices in the population (default 2,400)")
    shape.add_argument("--concentration", type=float,
                       help="per-device adoption propensity Beta(c p, c (1 - p)): 1 very dispersed, 50 alike (5)")
    shape.add_argument("--pareto", type=float, help="Pareto tail index of activity, 1.1-3 (default 1.3)")
    shape.add_argument("--activity-sigma", type=float, help="lognormal sigma of activity instead of --pareto")
    shape.add_argument("--holdback", type=float, help="share of devices in the cloud hold-back (default 0.2)")
    shape.add_argument("--arrival-days", type=float, help="devices join over the first N days (default 7)")
    shape.add_argument("--chatty", type=float, help="share of devices with 30 x the activity (default 0.002)")
    return shape


def _population(args: argparse.Namespace, needs: str | None = "--simulated") -> Any:
    """The heterogeneity family's population the knobs describe, or None without any knob; `needs`: the flag
    the knobs only make sense with (backtest's --simulated)."""
    flags = {"devices": "--devices", "adoption_concentration": "--concentration", "activity_pareto": "--pareto",
             "activity_sigma": "--activity-sigma", "holdback_share": "--holdback", "arrival_days": "--arrival-days",
             "chatty_share": "--chatty"}
    knobs = {k: getattr(args, flag.lstrip("-").replace("-", "_")) for k, flag in flags.items()}
    given = {k: v for k, v in knobs.items() if v is not None}
    if not given:
        return None
    if needs and not getattr(args, needs.lstrip("-"), False):
        raise UsageError("--devices, --concentration, --pareto, --activity-sigma, --holdback, --arrival-days and "
                         f"--chatty shape the simulated releases: add {needs}")
    from pipeline.planning.simulate import Population

    bad = [k for k, v in given.items() if v < 0 or (k in ("holdback_share", "chatty_share") and v >= 1)]
    if bad:
        raise UsageError(f"out of range: {', '.join(flags[k] for k in bad)} (--holdback and --chatty are shares in "
                         "[0, 1), the rest >= 0)")
    defaults = {"devices": 2400, "adoption_concentration": 5.0, "activity_pareto": 1.3, "holdback_share": 0.2,
                "arrival_days": 7.0, "chatty_share": 0.002}
    if "activity_sigma" in given and "activity_pareto" not in given:
        defaults["activity_pareto"] = 0.0  # a lognormal activity was asked for
    return Population(**{**defaults, **given, "devices": int(given.get("devices", defaults["devices"]))})


def cmd_admit(args: argparse.Namespace) -> int:
    from pipeline.planning.admit import admit

    config = _config(args)
    results = [admit(path, config) for path in args.task]  # every file is checked before any is shown
    if args.json:
        _emit_json(results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results])
    else:
        print("\n\n".join(str(r) for r in results))
    return Exit.OK


LARGE_SIMULATION_ROWS = 1_000_000


def cmd_simulate(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from pipeline.planning.simulate import write_parquet

    if args.rows < 0 or args.files < 1:
        raise UsageError("--rows must be >= 0 and --files >= 1")
    if not (0 <= args.edge_device_loss < 1 and 0 <= args.edge_churn < 1):
        raise UsageError("--edge-device-loss and --edge-churn must be in [0, 1)")
    start = datetime.fromisoformat(args.start) if args.start else None
    large = args.rows >= LARGE_SIMULATION_ROWS  # seconds of work: a bar on a terminal
    paths = write_parquet(args.out, args.release, args.rows, args.scenario, args.seed,
                          start=start, days=args.days, files=args.files, bad_rows=args.bad_rows,
                          edge_device_loss=args.edge_device_loss, edge_churn=args.edge_churn,
                          population=_population(args, needs=None),
                          progress=_Progress("step", min_items=2) if large else None)
    written = sum(pq.read_metadata(path).num_rows for path in paths)  # fewer than --rows after the injections
    print(f"wrote {written} rows of scenario {args.scenario} for release {args.release} "
          f"into {counted(len(paths), 'file')} under {args.out}")
    return Exit.OK


class _Scenarios:
    """simulate's scenario names as argparse choices, read only when needed: pipeline.simulate
    imports numpy and pyarrow (seconds), which `pipeline --help` must not wait for."""

    def _names(self) -> list[str]:
        from pipeline.planning.simulate import SCENARIOS

        return list(SCENARIOS)

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


def add_commands(sub: Any) -> None:
    """This group's subcommands, in the order `pipeline --help` lists them."""
    p = sub.add_parser("ledger", help="what the edge route served, saved and cost, and the estimates beside the field",
                       description="Counts from telemetry over the gate's window; unit costs from the config's "
                                   "`costs` section (each term only when its inputs exist).")
    p.add_argument("--release", required=True)
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.add_argument("--candidate", type=Path, action="append", default=[], metavar="FILE",
                   help="admit candidate file(s) to set beside the field (default: gates/candidates/<task>.yaml)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_ledger)

    p = sub.add_parser("backtest", help="replay the gate night by night over stored telemetry: false rollbacks "
                                        "(A/A splits) and recall of injected regressions",
                       description="Run it on a release you trust after changing a threshold or the statistics: "
                                   "each run re-splits devices or re-injects a regression (seeded) and judges "
                                   "every night of the window with the configured policy.")
    p.add_argument("--release", help="a release in the warehouse (one you trust: its rollbacks are false ones)")
    p.add_argument("--simulated", action="store_true",
                   help="instead, the simulated releases of docs/operating-characteristics.md (14 nights each)")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.add_argument("--nights", type=int, help="nightly looks, ending at --as-of (default: every day with data)")
    p.add_argument("--method", choices=("sequential", "fixed"), help="override statistics.method of the config")
    p.add_argument("--estimand", choices=ESTIMANDS, help="override statistics.estimand of the config")
    p.add_argument("--jobs", type=int, default=1, help="processes for --simulated (default 1)")
    shape = _population_options(p, "--simulated releases shaped like yours (any of these: A/A, and adoption losses "
                                   "of 3, 10 and 15 %% on that population; unset knobs take the grey-release defaults)")
    shape.add_argument("--rows-per-night", type=int, default=4300, help="rows a night (default 4,300)")
    p.add_argument("--runs", type=int, default=20, help="seeded repetitions per variant (default 20)")
    p.add_argument("--segment-rows", type=int, metavar="N",
                   help="subsample devices to about N edge rows in the median segment on the last night")
    p.add_argument("--inject", action="append", metavar="NAME=SIZE",
                   help="regressions to inject (default: adoption=0.10 latency=0.20 memory=0.20 fallback=0.10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    _engine_options(p)
    p.set_defaults(func=cmd_backtest)

    p = sub.add_parser("admit", help="before launch: score a candidate task for the edge and predict its budgets")
    p.add_argument("task", type=Path, nargs="+", help="candidate task YAML files (examples in gates/candidates/)")
    _config_option(p)
    p.add_argument("--json", action="store_true", help="JSON: one object, or a list for several files")
    p.set_defaults(func=cmd_admit)

    p = sub.add_parser("simulate", help="write realistic telemetry Parquet for a scenario")
    p.add_argument("--out", type=Path, required=True, help="folder to write into")
    p.add_argument("--release", required=True, help="the release the rows belong to, e.g. 4.13")
    p.add_argument("--rows", type=int, default=10_000, help="rows to write (default 10,000)")
    p.add_argument("--scenario", default="healthy", choices=_Scenarios(), metavar="SCENARIO",
                   help="what the release does: %(choices)s (default healthy)")
    p.add_argument("--seed", type=int, default=0, help="random seed: the same seed writes the same rows")
    p.add_argument("--files", type=int, default=1, help="number of Parquet files to split the rows into")
    p.add_argument("--days", type=int, default=7, help="days of telemetry, ending today (UTC)")
    p.add_argument("--start", help="first day, ISO date (default: --days before today)")
    p.add_argument("--bad-rows", type=int, default=0, help="rows that break contract rules, for testing")
    p.add_argument("--edge-device-loss", type=float, default=0.0, metavar="SHARE",
                   help="drop the edge rows of this share of edge devices, worst kill hazard first (an SRM)")
    p.add_argument("--edge-churn", type=float, default=0.0, metavar="SHARE",
                   help="this share of edge devices stop a day after their first request (their later edge rows go)")
    _population_options(p, "a population shaped like yours (the heterogeneity family of "
                           "docs/operating-characteristics.md; any of these: unset knobs take the grey-release "
                           "defaults; none: independent requests, a 20 %% hold-back of requests)")
    p.set_defaults(func=cmd_simulate)
