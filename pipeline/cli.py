"""The `pipeline` command: parse options, call one core function, render its result.

Exit codes (every command):
  0  done (for `gate`: keep_edge)
  1  `gate` only: partial_rollback or rollback_to_cloud
  2  usage or input error, a database held by another writer, or any failure of the tool
  3  `gate` only: insufficient_data
  130 stopped by SIGTERM/SIGINT (ingest, nightly): whole files are in, rerun to finish
Heavy modules (Great Expectations, the gate) are imported inside the commands
that need them, so `pipeline --help` and `pipeline gate` start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.errors import PipelineError, UsageError

EXIT_OK, EXIT_ROLLBACK, EXIT_ERROR, EXIT_INSUFFICIENT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; keep its message to one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _db_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=None,
                   help="DuckDB file (default: $PIPELINE_DB, else ./telemetry.duckdb)")


def _format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["table", "csv", "json"], help="default: table on a terminal, else csv")


def _as_of_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as-of", metavar="TIME",
                   help="pin the clock for a replay: the end of the evaluation window and the 'now' of the "
                        "future-event rule, ISO date or time in UTC (default: the wall clock)")


def _batch_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--validate-batch-rows", type=int, default=None, metavar="N",
                   help="rows of whole files validated per Great Expectations run (default 1,000,000; memory vs speed)")


def _config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, default=None,
                   help="gate config (default: $PIPELINE_CONFIG, else the shipped gates/admission.yaml)")


def _db(args: argparse.Namespace) -> Path:
    from pipeline.db import default_db_path

    return args.db or default_db_path()


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def _show(args: argparse.Namespace, result: Any) -> None:
    """A result object: its to_dict() under --json, else its text."""
    if args.json:
        _emit_json(result.to_dict())
    else:
        print(result)


class _ProgressBar:
    """A one-line bar on stderr, only on a terminal and only for more than a few files."""

    def __init__(self, min_files: int = 4):
        self.enabled = sys.stderr.isatty()
        self.min_files = min_files

    def __call__(self, done: int, total: int, path: Path) -> None:
        if not self.enabled or total < self.min_files:
            return
        width = 30
        filled = width * done // total
        name = path.name[:40]
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} files {name:<40}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def cmd_ingest(args: argparse.Namespace) -> int:
    from pipeline.db import writer_lock
    from pipeline.ingest import DEFAULT_BATCH_ROWS, ingest

    config = _config(args)  # a bad config fails before any work
    with writer_lock(_db(args), "ingest"):
        result = ingest(_db(args), args.paths, now=_as_of(args), progress=None if args.json else _ProgressBar(),
                        batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS)
        rollup = _refresh_rollup(args, config)
    if args.json:
        _emit_json({**result.to_dict(), "rollup": rollup.to_dict()})
    else:
        print(result)
        print(rollup)
    return EXIT_OK


def _config(args: argparse.Namespace):
    from pipeline.config import load_config

    return load_config(getattr(args, "config", None))


def _refresh_rollup(args: argparse.Namespace, config: Any, full: bool = False):
    from pipeline.aggregate import refresh

    return refresh(_db(args), config, full=full, now=_as_of(args))


def cmd_aggregate(args: argparse.Namespace) -> int:
    result = _refresh_rollup(args, _config(args), full=args.full)
    _show(args, result)
    return EXIT_OK


@contextmanager
def _warehouse(args: argparse.Namespace, config: Any, sandbox: bool = False) -> Iterator[Any]:
    """A read-only connection whose derived fields (network buckets, cap) follow `config`."""
    from pipeline import db
    from pipeline.aggregate import use_settings

    with db.reading(_db(args), sandbox=sandbox) as con:
        use_settings(con, config)
        yield con


def _evaluate(args: argparse.Namespace, config: Any, con: Any) -> Any:
    from pipeline.gate import evaluate_gate

    return evaluate_gate(con, args.release, config, as_of=_as_of(args))


def _format(args: argparse.Namespace) -> str:
    return args.format or ("table" if sys.stdout.isatty() else "csv")


def _print_rows(args: argparse.Namespace, cursor) -> None:
    from pipeline.render import rows_as

    columns = [d[0] for d in cursor.description] if cursor.description else []
    print(rows_as(_format(args), columns, cursor.fetchall()))


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    with _warehouse(args, _config(args), sandbox=True) as con:
        try:
            cursor = con.execute(args.query)
        except duckdb.Error as exc:
            message = str(exc).splitlines()[0]
            raise UsageError(f"refused or failed (the warehouse is read-only here): {message}") from None
        _print_rows(args, cursor)
    return EXIT_OK


def _params(pairs: list[str], allowed: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--param {pair!r} must look like key=value")
        if key not in allowed:
            raise UsageError(f"unknown parameter {key!r}; this query takes: {', '.join(allowed) or 'none'}")
        params[key] = value
    return params


def cmd_query(args: argparse.Namespace) -> int:
    from pipeline import sqlfiles

    queries = {q.name: q for q in sqlfiles.list_folder("queries")}
    if args.list or not args.name:
        for q in queries.values():
            params = ", ".join(q.params) or "none"
            print(f"{q.name:<24} {q.description}\n{'':<24} params: {params}")
        return EXIT_OK
    if args.name not in queries:
        raise UsageError(f"no query {args.name!r}; see pipeline query --list ({', '.join(queries)})")
    q = queries[args.name]
    names = sqlfiles.param_names(q)
    params = _params(args.param, names)
    missing = [p for p in sqlfiles.required_params(q) if p not in params]
    if missing:
        raise UsageError(f"query {q.name} needs --param {missing[0]}=...")
    bound = {name: params.get(name) for name in names}
    with _warehouse(args, _config(args)) as con:
        _print_rows(args, con.execute(q.text, bound) if bound else con.execute(q.text))
    return EXIT_OK


def _as_of(args: argparse.Namespace) -> datetime | None:
    """The pinned clock of a replay (--as-of), or None: the wall clock (pipeline/clock.py)."""
    from pipeline import clock

    if not getattr(args, "as_of", None):
        return None
    try:
        return clock.parse(args.as_of)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_gate(args: argparse.Namespace) -> int:
    config = _config(args)
    if args.check_config:
        print(f"{config.source}: ok (digest {config.digest})")
        return EXIT_OK
    if not args.release:
        raise UsageError("--release is required (or --check-config)")
    with _warehouse(args, config) as con:
        result = _evaluate(args, config, con)
    if args.routing_out:
        from pipeline.routing import write_routing_table

        write_routing_table(result, config, args.routing_out)
    from pipeline.history import record_evaluation

    _show(args, result)
    if not record_evaluation(_db(args), result, config):
        print("pipeline gate: another writer is busy; this evaluation and its alert are stored by the next one",
              file=sys.stderr)
    elif not args.no_alerts:
        _deliver_alerts(args, config)
    return result.exit_code  # a failed delivery is reported, but the exit code is the verdict's


def _deliver_alerts(args: argparse.Namespace, config) -> None:
    from pipeline.alerts import deliver
    from pipeline.errors import DatabaseBusy

    try:  # under --json stdout is the contract's object alone: alerts for the stdout sink go to stderr
        delivery = deliver(_db(args), config, out=sys.stderr if args.json else sys.stdout)
    except DatabaseBusy:
        print("pipeline gate: alerts wait in the outbox: another writer is busy", file=sys.stderr)
        return
    if delivery.errors:
        print(f"pipeline gate: {delivery}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.report import report_filename, write_report

    config = _config(args)
    with _warehouse(args, config) as con:
        result = _evaluate(args, config, con)
        path = write_report(con, args.release, config, args.out or Path(report_filename(args.release)),
                            result=result, candidates=args.candidate)
    print(f"wrote {path} (release {result.release}: {result.verdict})")
    return EXIT_OK


def cmd_ledger(args: argparse.Namespace) -> int:
    from pipeline.ledger import compute_ledger

    config = _config(args)
    for path in args.candidate:
        if not path.is_file():
            raise UsageError(f"--candidate {path}: no such file")
    with _warehouse(args, config) as con:
        ledger = compute_ledger(con, args.release, config, as_of=_as_of(args), candidates=args.candidate)
    _show(args, ledger)
    return EXIT_OK


def cmd_history(args: argparse.Namespace) -> int:
    from pipeline import db
    from pipeline.history import history
    from pipeline.render import rows_as

    with db.reading(_db(args)) as con:
        columns, rows = history(con, args.release)
    print(rows_as(_format(args), columns, rows))
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from pipeline.render import explain_segment

    config = _config(args)
    with _warehouse(args, config) as con:
        result = _evaluate(args, config, con)
    match = [s for s in result.segments if s.key == args.segment]
    if not match:
        known = ", ".join(s.key for s in result.segments) or "none"
        raise UsageError(f"no segment {args.segment!r} in release {args.release}; segments: {known}")
    print(explain_segment(result, match[0], config))
    return EXIT_OK


def cmd_nightly(args: argparse.Namespace) -> int:
    from pipeline.ingest import DEFAULT_BATCH_ROWS
    from pipeline.nightly import run_nightly

    if not args.landing.is_dir():
        raise UsageError(f"--landing {args.landing} is not a folder")
    run, results = run_nightly(_db(args), args.landing, _config(args), as_of=_as_of(args),
                               routing_dir=args.routing_dir, alert_out=sys.stderr if args.json else None,
                               batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS,
                               report_dir=args.report_dir)
    if args.json:
        _emit_json({**run.to_dict(), "gates": [r.to_dict() for r in results]})
    else:
        print(run)  # the alerts (stdout sink) above it carry the failing segments and gates
    return EXIT_OK if run.status == "ok" else EXIT_ERROR


def cmd_schedule(args: argparse.Namespace) -> int:
    from pipeline.ingest import DEFAULT_BATCH_ROWS
    from pipeline.nightly import run_nightly
    from pipeline.schedule import make_trigger, run_scheduler

    if not args.landing.is_dir():
        raise UsageError(f"--landing {args.landing} is not a folder")
    config = _config(args)
    trigger = make_trigger(args.cron, args.interval_seconds, args.timezone)

    def job() -> None:
        run, _ = run_nightly(_db(args), args.landing, _config(args), routing_dir=args.routing_dir, kind="scheduled",
                             batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS)
        print(run, flush=True)

    why = run_scheduler(_db(args), args.landing, config, trigger, args.misfire_grace_hours * 3600, job)
    print(f"pipeline schedule: {why}")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    from pipeline import db, sqlfiles
    from pipeline.render import rows_as

    with db.reading(_db(args)) as con:
        cur = sqlfiles.run(con, "ingest/recent_runs", {"limit": args.limit})
        print(rows_as(_format(args), [d[0] for d in cur.description], cur.fetchall()))
    return EXIT_OK


def cmd_admit(args: argparse.Namespace) -> int:
    from pipeline.admit import admit

    result = admit(args.task, _config(args))
    _show(args, result)
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from pipeline.output_schema import schema

    _emit_json(schema(args.output))
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from pipeline.simulate import SCENARIOS, write_parquet

    if args.scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.scenario!r}; choose one of: {', '.join(SCENARIOS)}")
    if args.rows < 0 or args.files < 1:
        raise UsageError("--rows must be >= 0 and --files >= 1")
    start = datetime.fromisoformat(args.start) if args.start else None
    paths = write_parquet(args.out, args.release, args.rows, args.scenario, args.seed,
                          start=start, days=args.days, files=args.files, bad_rows=args.bad_rows)
    print(f"wrote {args.rows} rows of scenario {args.scenario} for release {args.release} "
          f"into {len(paths)} files under {args.out}")
    return EXIT_OK


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("edge-telemetry-pipeline")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    from pipeline.output_schema import OUTPUTS

    parser = _Parser(prog="pipeline",
                     description="Telemetry ingestion and rollback gate for on-device language models.",
                     epilog="exit codes: 0 ok / keep_edge, 1 rollback (gate only), 2 error, 3 insufficient data")
    parser.add_argument("--version", action="version", version=f"pipeline {_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    parser.add_argument("--log-format", choices=["text", "json"], default="text",
                        help="structured step logs on stderr (json for log collectors)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("ingest", help="validate and load telemetry Parquet files or folders")
    p.add_argument("paths", nargs="+", type=Path, help="Parquet files, or folders searched for *.parquet")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    _batch_option(p)
    _config_option(p)
    _as_of_option(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("aggregate", help="refresh the daily rollup (only days with new rows)")
    _db_option(p)
    _config_option(p)
    p.add_argument("--full", action="store_true", help="recompute every day")
    _as_of_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_aggregate)

    p = sub.add_parser("sql", help="run ad hoc SQL on a read-only connection that cannot write or read files")
    p.add_argument("query", help="SQL; tables: events, events_enriched, rollup_daily, quarantine, files, ...")
    _db_option(p)
    _config_option(p)
    _format_option(p)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("query", help="run a named query from sql/queries with bound parameters")
    p.add_argument("name", nargs="?", help="query name (see --list)")
    p.add_argument("--list", action="store_true", help="list the queries, what they show and their parameters")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    _db_option(p)
    _config_option(p)
    _format_option(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("gate", help="decide keep edge / roll back to cloud per segment of a release",
                       description="Exit status: 0 keep_edge, 1 partial_rollback or rollback_to_cloud, "
                                   "2 usage or input error, 3 insufficient_data.")
    p.add_argument("--release", help="the release to judge, e.g. 4.12 (matches the release column exactly)")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.add_argument("--json", action="store_true", help="print the contract's JSON object")
    p.add_argument("--routing-out", type=Path, help="write the routing table the app consumes to this file")
    p.add_argument("--check-config", action="store_true", help="only validate the config and exit")
    p.add_argument("--no-alerts", action="store_true", help="store the evaluation and its alert, send nothing now")
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("explain", help="every gate's figures for one segment, and why it decided so")
    p.add_argument("--release", required=True)
    p.add_argument("--segment", required=True, metavar="TASK/TIER/BUCKET", help="e.g. rewrite/mid/weak")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("report", help="write a self-contained HTML page of a release's gate evaluation, with charts")
    p.add_argument("--release", required=True)
    p.add_argument("--out", type=Path, help="HTML file to write (default: ./report-<release>.html)")
    p.add_argument("--candidate", type=Path, action="append", default=[], metavar="FILE",
                   help="admit candidate file(s) for the estimate-beside-field table (default: gates/candidates/)")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.set_defaults(func=cmd_report)

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

    p = sub.add_parser("history", help="the stored gate verdicts of a release over time")
    p.add_argument("--release", required=True)
    _db_option(p)
    _format_option(p)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("nightly", help="the main job once: ingest new files, refresh the rollup, judge releases")
    p.add_argument("--landing", type=Path, required=True, help="folder where telemetry Parquet lands")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.add_argument("--routing-dir", type=Path, help="write routing-<release>.json for each judged release here")
    p.add_argument("--report-dir", type=Path,
                   help="write report-<release>.html for each judged release and an index.html here")
    p.add_argument("--json", action="store_true")
    _batch_option(p)
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
    _batch_option(p)
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("runs", help="recent job runs and their outcome")
    _db_option(p)
    p.add_argument("--limit", type=int, default=20)
    _format_option(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("admit", help="before launch: score a candidate task for the edge and predict its budgets")
    p.add_argument("task", type=Path, help="candidate task YAML (examples in gates/candidates/)")
    _config_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_admit)

    p = sub.add_parser("schema", help="print the JSON Schema of a --json output (each output has schema_version)")
    p.add_argument("output", choices=OUTPUTS)
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("simulate", help="write realistic telemetry Parquet for a scenario")
    p.add_argument("--out", type=Path, required=True, help="folder to write into")
    p.add_argument("--release", required=True)
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--scenario", default="healthy", help="healthy, postmortem, ... (see pipeline.simulate)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--files", type=int, default=1, help="number of Parquet files to split the rows into")
    p.add_argument("--days", type=int, default=7, help="days of telemetry, ending today (UTC)")
    p.add_argument("--start", help="first day, ISO date (default: --days before today)")
    p.add_argument("--bad-rows", type=int, default=0, help="rows that break contract rules, for testing")
    p.set_defaults(func=cmd_simulate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    batch_rows = getattr(args, "validate_batch_rows", None)
    if batch_rows is not None and batch_rows < 1:
        parser.error("--validate-batch-rows must be >= 1")
    from pipeline import logs

    logs.setup(args.log_format)
    from pipeline import stopping

    if args.command in ("ingest", "nightly", "aggregate"):
        stopping.install()  # SIGTERM/SIGINT: finish the file in hand, then stop
    try:
        return func(args)
    except stopping.Interrupted:
        print(f"pipeline {args.command}: stopped by a signal after the last whole file; run it again to finish",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except PipelineError as exc:
        print(f"pipeline {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # e.g. `| head`: not a verdict, so never 0 or 1
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"pipeline {args.command}: output closed early (broken pipe)", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"pipeline {args.command}: interrupted; the transaction in flight was rolled back", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the one boundary: a crash must never look like exit 1 (rollback)
        if args.debug or os.environ.get("PIPELINE_DEBUG"):
            traceback.print_exc()
        print(f"pipeline {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(rerun with --debug for the traceback)", file=sys.stderr)
        return EXIT_ERROR


def run() -> None:
    sys.exit(main())
