"""The job commands: nightly (the main job once) and schedule (it on a cron, APScheduler)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pipeline.cli.common import (
    EXIT_DATA_QUALITY,
    EXIT_ERROR,
    EXIT_OK,
    _announce_new_warehouse,
    _as_of,
    _as_of_option,
    _config,
    _config_option,
    _db,
    _db_option,
    _emit_json,
    _engine_name,
    _engine_options,
    _ingest_options,
    _reader_limits,
    _spark,
)
from pipeline.common.errors import UsageError


def cmd_nightly(args: argparse.Namespace) -> int:
    from pipeline.ingest.run import DEFAULT_BATCH_ROWS
    from pipeline.jobs.nightly import run_nightly

    if not args.landing.is_dir():
        raise UsageError(f"--landing {args.landing} is not a folder")
    config = _config(args)
    if args.report_dir and _engine_name(args, config) == "spark":
        raise UsageError("--report-dir: the HTML report reads events from the DuckDB file and is not built on "
                         "the Spark engine yet; run the nightly job without it")
    spark = _spark(args, config)
    with _announce_new_warehouse(args):
        run, results = run_nightly(_db(args), args.landing, config, as_of=_as_of(args), engine=spark,
                                   routing_dir=args.routing_dir, alert_out=sys.stderr if args.json else None,
                                   batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS,
                                   reader=_reader_limits(args), report_dir=args.report_dir)
    if args.json:
        _emit_json({**run.to_dict(), "gates": [r.to_dict() for r in results]})
    else:
        print(run)  # the alerts (stdout sink) above it carry the failing segments and gates
    if run.status != "ok":
        return EXIT_ERROR
    return EXIT_DATA_QUALITY if run.data_quality else EXIT_OK


def cmd_schedule(args: argparse.Namespace) -> int:
    from pipeline.ingest.run import DEFAULT_BATCH_ROWS
    from pipeline.jobs.nightly import run_nightly
    from pipeline.jobs.schedule import make_trigger, run_scheduler

    if not args.landing.is_dir():
        raise UsageError(f"--landing {args.landing} is not a folder")
    config = _config(args)
    trigger = make_trigger(args.cron, args.interval_seconds, args.timezone)
    spark = _spark(args, config)  # one session for every run

    def job() -> None:
        run, _ = run_nightly(_db(args), args.landing, _config(args), routing_dir=args.routing_dir, kind="scheduled",
                             batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS, reader=_reader_limits(args),
                             engine=spark)
        print(run, flush=True)

    why = run_scheduler(_db(args), args.landing, config, trigger, args.misfire_grace_hours * 3600, job)
    print(f"pipeline schedule: {why}")
    return EXIT_OK


def add_commands(sub: Any) -> None:
    """This group's subcommands, in the order `pipeline --help` lists them."""
    p = sub.add_parser("nightly", help="the main job once: ingest new files, refresh the rollup, judge releases")
    p.add_argument("--landing", type=Path, required=True, help="folder where telemetry Parquet lands")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.add_argument("--routing-dir", type=Path, help="write routing-<release>.json for each judged release here")
    p.add_argument("--report-dir", type=Path,
                   help="write report-<release>.html for each judged release and an index.html here")
    p.add_argument("--json", action="store_true", help="print the run and every verdict as one JSON object")
    _ingest_options(p)
    _engine_options(p)
    p.set_defaults(func=cmd_nightly)

    p = sub.add_parser("schedule", help="keep running and fire the nightly job on a cron schedule (APScheduler)")
    p.add_argument("--landing", type=Path, required=True, help="folder where telemetry Parquet lands")
    _db_option(p)
    _config_option(p)
    p.add_argument("--cron", default="0 2 * * *", help="crontab expression (default: 02:00 every day)")
    p.add_argument("--timezone", default="UTC", help="timezone of --cron (default UTC: no DST surprises)")
    p.add_argument("--interval-seconds", type=float, help="fire every N seconds instead of --cron")
    p.add_argument("--misfire-grace-hours", type=float, default=24.0,
                   help="a run missed by less than this still runs, once (default 24)")
    p.add_argument("--routing-dir", type=Path, help="write routing-<release>.json for each judged release here")
    _ingest_options(p)
    _engine_options(p)
    p.set_defaults(func=cmd_schedule)
