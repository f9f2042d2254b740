"""The job commands: nightly (the main job once), look (an intra-day look once), schedule (them on a cron and an
interval, APScheduler), serve (the decisions over
HTTP: OFREP, rollout controllers), and what on-call teams plug in: metrics (for Prometheus) and alerts test (each
sink, or the request it would get)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pipeline.cli.common import (
    _announce_new_warehouse,
    _as_of,
    _as_of_option,
    _check_landings,
    _config,
    _config_option,
    _db,
    _db_option,
    _emit_json,
    _engine_name,
    _engine_options,
    _ingest_options,
    _landing,
    _reader_limits,
    _spark,
)
from pipeline.common.errors import UsageError
from pipeline.common.exit_codes import Exit

LOOK = "look"  # the runs table's kind of an intra-day look


def _duration(text: str) -> float:
    """`15m`, `1h`, `90s` (or plain seconds) as seconds, > 0."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 15m, 1h or 900s") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration must be > 0")
    return seconds


def cmd_nightly(args: argparse.Namespace) -> int:
    from pipeline.ingest.run import DEFAULT_BATCH_ROWS
    from pipeline.jobs.nightly import run_nightly

    config = _config(args)
    engine = _engine_name(args, config)
    _check_landings([args.landing], engine, folders_only=True)
    if getattr(args, "report_dir", None) and engine == "spark":
        raise UsageError("--report-dir: the HTML report reads events from the DuckDB file and is not built on "
                         "the Spark engine yet; run the nightly job without it")
    spark = _spark(args, config)
    with _announce_new_warehouse(args):
        run, results = run_nightly(_db(args), args.landing, config, as_of=_as_of(args), engine=spark,
                                   routing_dir=args.routing_dir, alert_out=sys.stderr if args.json else None,
                                   batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS,
                                   reader=_reader_limits(args), report_dir=getattr(args, "report_dir", None),
                                   relist=args.relist, kind=args.kind, intraday=args.kind == LOOK)
    if args.json:
        _emit_json({**run.to_dict(), "gates": [r.to_dict() for r in results]})
    else:
        print(run)  # the alerts (stdout sink) above it carry the failing segments and gates
    if run.status != "ok":
        return Exit.ERROR
    return Exit.DATA_QUALITY if run.data_quality else Exit.OK


def cmd_schedule(args: argparse.Namespace) -> int:
    from pipeline.ingest.run import DEFAULT_BATCH_ROWS
    from pipeline.jobs.nightly import run_nightly
    from pipeline.jobs.schedule import make_trigger, run_scheduler

    config = _config(args)
    _check_landings([args.landing], _engine_name(args, config), folders_only=True)
    trigger = make_trigger(args.cron, args.interval_seconds, args.timezone)
    spark = _spark(args, config)  # one session for every run

    def job(kind: str = "scheduled") -> None:
        run, _ = run_nightly(_db(args), args.landing, _config(args), routing_dir=args.routing_dir, kind=kind,
                             batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS, reader=_reader_limits(args),
                             engine=spark, relist=args.relist, intraday=kind == LOOK)
        print(run, flush=True)

    why = run_scheduler(_db(args), args.landing, config, trigger, args.misfire_grace_hours * 3600, job,
                        look_every_s=args.look_every)
    print(f"pipeline schedule: {why}")
    return Exit.OK


def cmd_metrics(args: argparse.Namespace) -> int:
    from pipeline.delivery.metrics import text, write_textfile
    from pipeline.warehouse import db

    with db.reading(_db(args)) as con:
        if args.textfile:
            write_textfile(con, args.textfile)
            print(f"wrote {args.textfile}")
        else:
            print(text(con), end="")
    return Exit.OK


def cmd_serve(args: argparse.Namespace) -> int:
    from pipeline.delivery.serve import serve

    path = _db(args)
    if not path.exists():
        raise UsageError(f"{path}: no warehouse there (pipeline nightly or pipeline init makes one)")
    if args.refresh_seconds <= 0:
        raise UsageError("--refresh-seconds must be > 0")
    serve(path, _config(args), args.host, args.port, args.refresh_seconds, args.cache_seconds)
    return Exit.OK


def cmd_alerts_test(args: argparse.Namespace) -> int:
    from pipeline.common import clock
    from pipeline.delivery.check import chosen, dry_run, send_test

    config = _config(args)
    sinks = chosen(config, args.sink)
    now = clock.now()
    if args.dry_run:
        dry_run(sinks, now, sys.stdout)
        return Exit.OK
    tried = send_test(sinks, config, now, sys.stdout)
    for t in tried:
        print(f"{t.sink}: {'ok' if t.ok else 'FAILED'}: {t.said}", file=sys.stdout if t.ok else sys.stderr)
    return Exit.OK if all(t.ok for t in tried) else Exit.SINK_FAILED


def _job_options(p: argparse.ArgumentParser) -> None:
    """--landing, --db and --config: what nightly, look and schedule all read."""
    p.add_argument("--landing", type=_landing, required=True,
                   help="folder, or s3://, gs:// or az:// bucket/prefix, where telemetry Parquet lands "
                        "(docs/landing.md)")
    _db_option(p)
    _config_option(p)


def add_commands(sub: Any) -> None:
    """This group's subcommands, in the order `pipeline --help` lists them."""
    p = sub.add_parser("nightly", help="the main job once: ingest new files, refresh the rollup, judge releases")
    _job_options(p)
    _as_of_option(p)
    p.add_argument("--routing-dir", type=Path, help="write routing-<release>.json for each judged release here")
    p.add_argument("--report-dir", type=Path,
                   help="write report-<release>.html for each judged release and an index.html here")
    p.add_argument("--json", action="store_true", help="print the run and every verdict as one JSON object")
    _ingest_options(p)
    _engine_options(p)
    p.set_defaults(func=cmd_nightly, kind="nightly")

    p = sub.add_parser("look", help="an intra-day look once: ingest what landed, add it to the day's roll-ups, "
                                    "judge the day so far, roll back at once what fails (docs/intraday.md)",
                       description="A failing segment moves toward the cloud and its route is published at once; a "
                                   "pass moves nothing (recovery waits for whole days). Stored as a look, never as "
                                   "an evaluation of a day: the nightly's verdicts are unchanged. Exit codes as "
                                   "nightly's.")
    _job_options(p)
    _as_of_option(p)
    p.add_argument("--routing-dir", type=Path, help="write routing-<release>.json for each judged release here")
    p.add_argument("--json", action="store_true", help="print the run and every look as one JSON object")
    _ingest_options(p)
    _engine_options(p)
    p.set_defaults(func=cmd_nightly, kind=LOOK)

    p = sub.add_parser("schedule", help="keep running and fire the nightly job on a cron schedule (APScheduler)")
    _job_options(p)
    p.add_argument("--cron", default="0 2 * * *", help="crontab expression (default: 02:00 every day)")
    p.add_argument("--timezone", default="UTC", help="timezone of --cron (default UTC: no DST surprises)")
    p.add_argument("--interval-seconds", type=float, help="fire every N seconds instead of --cron")
    p.add_argument("--misfire-grace-hours", type=float, default=24.0,
                   help="a run missed by less than this still runs, once (default 24)")
    p.add_argument("--look-every", type=_duration, metavar="DURATION",
                   help="also an intra-day look every DURATION (15m, 1h): pipeline look between the nightly runs")
    p.add_argument("--routing-dir", type=Path, help="write routing-<release>.json for each judged release here")
    _ingest_options(p)
    _engine_options(p)
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("metrics", help="the warehouse's state for Prometheus (node_exporter's textfile collector)",
                       description="Prints the metrics in the Prometheus text format, or writes them atomically "
                                   "to --textfile. edge_pipeline_last_success_timestamp_seconds is the dead man's "
                                   "switch (README: On call).")
    _db_option(p)
    p.add_argument("--textfile", type=Path, metavar="PATH",
                   help="write here (a .prom file in node_exporter's --collector.textfile.directory)")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("serve", help="serve the stored decisions over HTTP, read-only: routing documents, OFREP "
                                     "flag evaluation, Argo Rollouts and Flagger checks, metrics",
                       description="Answers from memory, re-reading the warehouse every --refresh-seconds (a "
                                   "snapshot while a writer holds it: never waits). Paths and safety: "
                                   "docs/publishing.md. With PIPELINE_SERVE_TOKEN set, requests need "
                                   "`Authorization: Bearer <token>`. Stops on SIGTERM or Ctrl-C (exit 0).")
    _db_option(p)
    _config_option(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--refresh-seconds", type=float, default=5.0, help="how often the warehouse is re-read (default 5)")
    p.add_argument("--cache-seconds", type=int, default=30, help="Cache-Control max-age of the documents (default 30)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("alerts", help="check the alert sinks: send a marked test alert, or print its requests")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    t = actions.add_parser("test", help="send a clearly marked test alert to each sink (or --sink NAME)",
                           description="Exit status: 0 when every sink took the test alert, 5 when one did not "
                                       "(each says why), 2 for a usage error.")
    t.add_argument("--sink", metavar="NAME", help="only this sink (its `name`, else its kind)")
    t.add_argument("--dry-run", action="store_true", help="print the exact request each sink would get; send nothing")
    _config_option(t)
    t.set_defaults(func=cmd_alerts_test)
