"""The `pipeline` command: parse options, call one core function, render its result.

Exit codes (every command):
  0  done (for `gate`: keep_edge)
  1  `gate` only: partial_rollback or rollback_to_cloud
  2  usage or input error, a database held by another writer, or any failure of the tool
  3  `gate` only: insufficient_data
  4  `nightly` only: the job ran, but the data looks wrong (files rejected, too many rows
     quarantined, nothing new for days); a data_quality alert says what
  124 `sql` / `query`: the statement ran past --timeout and was stopped
  130 stopped by SIGTERM/SIGINT (ingest, nightly): whole files are in, rerun to finish; Ctrl-C in sql/query
Heavy modules (Great Expectations, the gate) are imported inside the commands
that need them, so `pipeline --help` and `pipeline gate` start fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import re
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.common.errors import PipelineError, UsageError
from pipeline.common.registry import ESTIMANDS

EXIT_OK, EXIT_ROLLBACK, EXIT_ERROR, EXIT_INSUFFICIENT, EXIT_DATA_QUALITY, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
HARD_STOP = "stopped by a signal at once; the transaction in flight was rolled back, whole files are in; " \
            "run it again to finish"
EXIT_CODES = ("exit codes: 0 ok / keep_edge, 1 rollback (gate only), 2 usage or input error or any failure, "
              "3 insufficient data (gate only), 4 data-quality alarm (nightly only), 124 sql/query time limit, "
              "130 stopped by a signal")


def _did_you_mean(tokens: Sequence[str], options: Sequence[str]) -> str:
    """'; did you mean --release?' for the first option-like token that is not an option but is close to one."""
    for token in tokens:
        name = token.partition("=")[0]
        if name.startswith("-") and name not in options:
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
            if close:
                return f"; {name} is not an option here: did you mean {close[0]}?"
    return ""


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; keep its message to one line, with a suggestion for a
    mistyped option or command."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, extras = self.parse_known_args(args, namespace)
        if extras:  # report it from the sub-command, whose options a mistyped one is close to
            sub = self._subcommands().get(getattr(ns, "command", None) or "", self)
            sub.error(f"unrecognized arguments: {' '.join(extras)}{_did_you_mean(extras, sub._option_names())}")
        return ns

    def _subcommands(self) -> dict[str, _Parser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    def _option_names(self) -> list[str]:
        return list(self._option_string_actions)

    def error(self, message: str) -> None:  # type: ignore[override]
        wrong = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if wrong:
            close = difflib.get_close_matches(wrong.group(1), re.findall(r"'([^']*)'", wrong.group(2)), n=1)
            message += f"; did you mean {close[0]}?" if close else ""
        elif "unrecognized arguments" not in message:
            message += _did_you_mean(getattr(self, "_seen", []), self._option_names())
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _db_option(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: given here it wins, else the value given before the command (`pipeline --db F gate`) stays
    p.add_argument("--db", type=Path, default=argparse.SUPPRESS,
                   help="DuckDB file (default: $PIPELINE_DB, else ./telemetry.duckdb)")


def _global_options(p: argparse.ArgumentParser, top: bool) -> None:
    """--debug and --log-format, taken before the command or after it (SUPPRESS: the one before stays)."""
    p.add_argument("--debug", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="show tracebacks of unexpected errors")
    p.add_argument("--log-format", choices=["text", "json"], default="text" if top else argparse.SUPPRESS,
                   help="structured step logs on stderr (json for log collectors)")
    p.add_argument("--busy-timeout", type=float, default=None if top else argparse.SUPPRESS, metavar="SECONDS",
                   help="how long to wait for a database another process holds "
                        "(default: $PIPELINE_BUSY_TIMEOUT, else 30)")


def _format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["table", "csv", "json"], help="default: table on a terminal, else csv")


def _as_of_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as-of", metavar="TIME",
                   help="pin the clock for a replay: the end of the evaluation window and the 'now' of the "
                        "future-event rule, ISO date or time in UTC (default: the wall clock)")


def _ingest_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--validate-batch-rows", type=int, default=None, metavar="N",
                   help="rows of whole files validated per Great Expectations run (default 1,000,000; memory vs speed)")
    p.add_argument("--reader-timeout", type=float, default=None, metavar="SECONDS",
                   help="reject a landed file whose reading takes longer (default 60)")
    p.add_argument("--reader-memory", type=int, default=None, metavar="MB",
                   help="reject a landed file whose reader needs more memory (default 2048)")


def _reader_limits(args: argparse.Namespace) -> Any:
    """The isolated reader's limits (pipeline/ingest/isolated.py), the defaults where no option is given."""
    from pipeline.ingest.isolated import ReaderLimits

    defaults = ReaderLimits()
    return ReaderLimits(seconds=args.reader_timeout or defaults.seconds,
                        memory_mb=args.reader_memory or defaults.memory_mb)


def _timeout_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop the statement after this long, exit 124 (default: $PIPELINE_SQL_TIMEOUT, else 5; "
                        "0 = no limit)")


def _engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["duckdb", "spark"], default=None,
                   help="where events live and the rollup and gate SQL run (default: engine.name of the config, "
                        "else duckdb; docs/spark.md)")
    p.add_argument("--spark-remote", metavar="sc://HOST:PORT", default=None,
                   help="Spark Connect server to run on (implies --engine spark; default: engine.spark.remote)")
    p.add_argument("--spark-master", metavar="URL", default=None,
                   help="master of a Spark session started here, e.g. local[4] (default: engine.spark.master)")
    p.add_argument("--warehouse", metavar="DIR|URI", default=None,
                   help="root of the Spark tables (default: engine.spark.warehouse, else <db>.spark beside --db)")


def _engine_name(args: argparse.Namespace, config: Any) -> str:
    if getattr(args, "spark_remote", None):
        return "spark"
    return getattr(args, "engine", None) or config.engine.name


def _spark(args: argparse.Namespace, config: Any) -> Any:
    """The Spark engine when the command runs on Spark, else None (pyspark is imported here, and only here,
    for the commands that take --engine)."""
    if _engine_name(args, config) != "spark":
        return None
    from pipeline.warehouse.spark.engine import open_engine

    return open_engine(_db(args), config, master=args.spark_master, remote=args.spark_remote,
                       warehouse=args.warehouse)


@contextmanager
def _telemetry(args: argparse.Namespace, config: Any) -> Iterator[Any]:
    """Where the command reads events: the Spark engine, or a read-only connection to the DuckDB warehouse."""
    spark = _spark(args, config)
    if spark is not None:
        yield spark
        return
    with _warehouse(args, config) as con:
        yield con


def _config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                   help="gate config (default: $PIPELINE_CONFIG, else the shipped gates/admission.yaml)")


def _db(args: argparse.Namespace) -> Path:
    from pipeline.warehouse.db import default_db_path

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
        from pipeline.ingest.landing import shown

        name = shown(path.name)[:40]
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} files {name:<40}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def cmd_ingest(args: argparse.Namespace) -> int:
    from pipeline.ingest.run import DEFAULT_BATCH_ROWS, ingest
    from pipeline.warehouse.handle import Warehouse

    config = _config(args)  # a bad config fails before any work
    spark = _spark(args, config)
    with Warehouse(_db(args), "ingest") as wh, _announce_new_warehouse(args):
        progress = None if args.json else _ProgressBar()
        if spark is not None:
            from pipeline.ingest.spark import ingest_spark

            result = ingest_spark(wh.path, spark, args.paths, now=_as_of(args), progress=progress)
        else:
            result = ingest(wh, args.paths, now=_as_of(args), progress=progress,
                            batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS, reader=_reader_limits(args))
        rollup = _refresh_rollup(args, config, spark=spark, warehouse=wh)
    if args.json:
        _emit_json({**result.to_dict(), "rollup": rollup.to_dict()})
    else:
        print(result)
        print(rollup)
    return EXIT_OK


@contextmanager
def _announce_new_warehouse(args: argparse.Namespace) -> Iterator[None]:
    """ingest and nightly may start a warehouse in an existing folder: say so on stderr."""
    path = _db(args)
    existed = path.exists()
    try:
        yield
    finally:
        if not existed and path.exists():
            print(f"pipeline {args.command}: created a new warehouse at {path}", file=sys.stderr)


def cmd_init(args: argparse.Namespace) -> int:
    from pipeline.warehouse.db import init_warehouse

    path = _db(args)
    if init_warehouse(path):
        print(f"created a new warehouse at {path}")
    else:
        print(f"{path} is already a warehouse; its tables are in place")
    return EXIT_OK


def _config(args: argparse.Namespace):
    from pipeline.common.config import load_config

    return load_config(getattr(args, "config", None))


def _refresh_rollup(args: argparse.Namespace, config: Any, full: bool = False, spark: Any = None,
                    warehouse: Any = None):
    """The rollup refreshed, through the command's warehouse handle when it has one."""
    if spark is not None:
        from pipeline.warehouse.spark.aggregate import refresh_spark

        return refresh_spark(_db(args), spark, config, full=full, now=_as_of(args))
    from pipeline.warehouse.aggregate import refresh

    return refresh(warehouse or _db(args), config, full=full, now=_as_of(args))


def cmd_aggregate(args: argparse.Namespace) -> int:
    config = _config(args)
    spark = _spark(args, config)
    result = _refresh_rollup(args, config, full=args.full, spark=spark)
    _show(args, result)
    return EXIT_OK


@contextmanager
def _warehouse(args: argparse.Namespace, config: Any, sandbox: bool = False) -> Iterator[Any]:
    """A read-only connection whose derived fields (network buckets, cap) follow `config`."""
    from pipeline.warehouse import db
    from pipeline.warehouse.aggregate import use_settings

    with db.reading(_db(args), sandbox=sandbox) as con:
        use_settings(con, config)
        yield con


def _evaluate(args: argparse.Namespace, config: Any, con: Any) -> Any:
    from pipeline.gate.evaluate import evaluate_gate

    return evaluate_gate(con, args.release, config, as_of=_as_of(args))


def _format(args: argparse.Namespace) -> str:
    return args.format or ("table" if sys.stdout.isatty() else "csv")


def _timeout(args: argparse.Namespace) -> float:
    from pipeline.warehouse.adhoc import default_timeout

    if args.timeout is None:
        return default_timeout()
    if args.timeout < 0:
        raise UsageError("--timeout must be >= 0 seconds (0 = no limit)")
    return args.timeout


def _print_limited(args: argparse.Namespace, con: Any, sql: str, params: dict[str, Any] | None = None) -> None:
    from pipeline.common.tables import rows_as
    from pipeline.warehouse.adhoc import run_limited

    columns, rows = run_limited(con, sql, params, _timeout(args))
    print(rows_as(_format(args), columns, rows))


# a mistake in the query itself: DuckDB's message and hint say it all, the read-only note would mislead
_QUERY_MISTAKES = ("CatalogException", "BinderException", "ParserException", "ConversionException")


def _sql_error(exc: Exception) -> str:
    """DuckDB's message with its hint (`Did you mean "events"?`); the read-only note only where it may be why."""
    from pipeline.common.errors import duckdb_problem

    message = duckdb_problem(exc)
    if type(exc).__name__ in _QUERY_MISTAKES and "read-only" not in message:
        return message
    return f"refused or failed (the warehouse is read-only here): {message}"


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    from pipeline.warehouse.adhoc import check_read_statement

    if not args.query.strip():
        raise UsageError('no SQL given; e.g. pipeline sql "SELECT count(*) FROM events"')
    with _warehouse(args, _config(args), sandbox=True) as con:
        check_read_statement(con, args.query)
        try:
            _print_limited(args, con, args.query)
        except duckdb.Error as exc:
            raise UsageError(_sql_error(exc)) from None
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
    from pipeline.warehouse import sqlfiles

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
    bound = {name: None for name in names} | sqlfiles.convert_params(q, params)
    with _warehouse(args, _config(args)) as con:
        if bound.get("release") is not None:
            _require_release(con, bound["release"])
        _print_limited(args, con, q.text, bound)
    return EXIT_OK


def _require_release(con: Any, release: str) -> None:
    from pipeline.gate.evaluate import require_release

    require_release(con, release)


def _as_of(args: argparse.Namespace) -> datetime | None:
    """The pinned clock of a replay (--as-of), or None: the wall clock (pipeline/common/clock.py)."""
    from pipeline.common import clock

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
    from pipeline.delivery.alerts import on_change
    from pipeline.rollout import state as rollout
    from pipeline.rollout.history import default_trigger, record_evaluation
    from pipeline.warehouse.handle import Warehouse

    spark = _spark(args, config)
    if spark is not None:  # events and rollups on Spark; rollout state in the DuckDB file
        from pipeline.warehouse import db

        result = _evaluate(args, config, spark)
        with db.reading(_db(args)) as con:
            states = rollout.preview(con, result.to_dict(), config)
    else:
        with _warehouse(args, config) as con:
            result = _evaluate(args, config, con)
            states = rollout.preview(con, result.to_dict(), config)  # what storing it will make of the states
    _show_gate(args, result)
    if args.dry_run:
        print(f"pipeline gate: dry run: nothing stored, no alert; rollout would be: "
              f"{rollout.describe(states, config)}", file=sys.stderr)
    else:
        # the command's handle: it takes the writer lock only to record and to deliver, never waiting for it
        wh = Warehouse(_db(args), "gate")
        recorded = record_evaluation(wh, result, config, trigger=args.trigger or default_trigger(),
                                     on_change=on_change)
        for warning in recorded.warnings:
            print(f"pipeline gate: warning: {warning}", file=sys.stderr)
        if not recorded:
            print("pipeline gate: another writer is busy; this evaluation and its alert are stored by the next one",
                  file=sys.stderr)
        else:
            states = recorded.states or states
            if not args.json:
                import textwrap

                from pipeline.views.terminal import terminal_width

                line = (f"rollout of release {result.release} now: {rollout.describe(states, config)} "
                        f"(pipeline state --release {result.release})")
                width = terminal_width(sys.stdout)  # wrapped like the gate view above it, not cut
                print(textwrap.fill(line, width, subsequent_indent="  ") if width else line)
            if not args.no_alerts:
                _deliver_alerts(args, config, wh)
    if args.routing_out:
        from pipeline.rollout.routing import write_routing_table

        write_routing_table(result, config, args.routing_out, states)
    return result.exit_code  # a failed delivery is reported, but the exit code is the verdict's


def _show_gate(args: argparse.Namespace, result: Any) -> None:
    """--json: the contract's object; else the view for people (pipeline/views/terminal.py)."""
    if args.json:
        _emit_json(result.to_dict())
        return
    from pipeline.views.terminal import gate_view, terminal_width, wants_colour

    print(gate_view(result, width=terminal_width(sys.stdout), colour=wants_colour(sys.stdout, args.no_color),
                    wide=args.wide, show_all=args.all))


def _deliver_alerts(args: argparse.Namespace, config: Any, warehouse: Any) -> None:
    from pipeline.common.errors import DatabaseBusy
    from pipeline.delivery.alerts import deliver

    try:  # under --json stdout is the contract's object alone: alerts for the stdout sink go to stderr
        delivery = deliver(warehouse, config, out=sys.stderr if args.json else sys.stdout)
    except DatabaseBusy:
        print("pipeline gate: alerts wait in the outbox: another writer is busy", file=sys.stderr)
        return
    if delivery.errors or delivery.repairs:
        print(f"pipeline gate: {delivery}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.views.report import report_filename, write_report

    config = _config(args)
    with _warehouse(args, config) as con:
        result = _evaluate(args, config, con)
        path = write_report(con, args.release, config, args.out or Path(report_filename(args.release)),
                            result=result, candidates=args.candidate)
    print(f"wrote {path} (release {result.release}: {result.verdict})")
    return EXIT_OK


def cmd_ledger(args: argparse.Namespace) -> int:
    from pipeline.planning.ledger import compute_ledger

    config = _config(args)
    for path in args.candidate:
        if not path.is_file():
            raise UsageError(f"--candidate {path}: no such file")
    with _warehouse(args, config) as con:
        ledger = compute_ledger(con, args.release, config, as_of=_as_of(args), candidates=args.candidate)
    _show(args, ledger)
    return EXIT_OK


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
        return EXIT_OK
    if not args.release:
        raise UsageError("backtest needs --release R (or --simulated)")
    try:
        injections = [parse_injection(s) for s in args.inject] if args.inject else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    as_of = clock.now(_as_of(args))
    with _telemetry(args, config) as source:  # on Spark, the release's rows come from Spark; the replay runs in DuckDB
        result = backtest(source, args.release, config, as_of, nights=args.nights, runs=args.runs,
                          segment_rows=args.segment_rows, injections=injections, seed=args.seed)
    _show(args, result)
    return EXIT_OK


def _population(args: argparse.Namespace) -> Any:
    """The heterogeneity family's population the --simulated knobs describe, or None without any knob."""
    knobs = {"devices": args.devices, "adoption_concentration": args.concentration,
             "activity_pareto": args.pareto, "activity_sigma": args.activity_sigma,
             "holdback_share": args.holdback, "arrival_days": args.arrival_days, "chatty_share": args.chatty}
    given = {k: v for k, v in knobs.items() if v is not None}
    if not given:
        return None
    if not args.simulated:
        raise UsageError("--devices, --concentration, --pareto, --activity-sigma, --holdback, --arrival-days and "
                         "--chatty shape the simulated releases: add --simulated")
    from pipeline.planning.simulate import Population

    bad = [k for k, v in given.items() if v < 0 or (k in ("holdback_share", "chatty_share") and v >= 1)]
    if bad:
        raise UsageError(f"out of range: {', '.join(bad)} (shares in [0, 1), the rest >= 0)")
    defaults = {"devices": 2400, "adoption_concentration": 5.0, "activity_pareto": 1.3, "holdback_share": 0.2,
                "arrival_days": 7.0, "chatty_share": 0.002}
    if "activity_sigma" in given and "activity_pareto" not in given:
        defaults["activity_pareto"] = 0.0  # a lognormal activity was asked for
    return Population(**{**defaults, **given, "devices": int(given.get("devices", defaults["devices"]))})


def cmd_history(args: argparse.Namespace) -> int:
    from pipeline.common.tables import rows_as
    from pipeline.rollout.history import history
    from pipeline.warehouse import db

    if args.limit < 1:
        raise UsageError("--limit must be >= 1")
    with db.reading(_db(args)) as con:
        _require_release(con, args.release)
        columns, rows = history(con, args.release, args.limit)
    print(rows_as("json" if args.json else _format(args), columns, rows))
    return EXIT_OK


def cmd_state(args: argparse.Namespace) -> int:
    from pipeline.rollout import state as rollout
    from pipeline.warehouse import db

    config = _config(args)
    with db.reading(_db(args)) as con:
        view = rollout.StateView(args.release, rollout.stored_states(con, args.release), config)
    if args.json:
        _emit_json(view.to_dict())
    else:
        from pipeline.views.render import state_text

        print(state_text(view))
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from pipeline.views.terminal import explain_dict, explain_view, terminal_width, wants_colour

    config = _config(args)
    with _telemetry(args, config) as source:
        result = _evaluate(args, config, source)
    match = [s for s in result.segments if s.key == args.segment]
    if not match:
        known = ", ".join(s.key for s in result.segments) or "none"
        if len(args.segment.split("/")) != 3:
            raise UsageError(f"--segment {args.segment!r} is not of the form TASK/TIER/BUCKET "
                             f"(e.g. rewrite/mid/weak); segments of release {args.release}: {known}")
        raise UsageError(f"no segment {args.segment!r} in release {args.release}; segments: {known}")
    if args.json:
        _emit_json(explain_dict(result, match[0], config))
    else:
        print(explain_view(result, match[0], config, width=terminal_width(sys.stdout),
                           colour=wants_colour(sys.stdout, args.no_color)))
    return EXIT_OK


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


def cmd_runs(args: argparse.Namespace) -> int:
    from pipeline.common.tables import rows_as
    from pipeline.warehouse import db, sqlfiles
    from pipeline.warehouse.runs import aborted_text, alive

    with db.reading(_db(args)) as con:
        cur = sqlfiles.run(con, "ingest/recent_runs", {"limit": args.limit})
        columns = [d[0] for d in cur.description][:-3]
        rows = []
        for *row, pid, host, proc_start in cur.fetchall():  # a run whose process died reads as aborted at once
            if row[4] == "running" and not alive(pid, host, proc_start):
                row[4], row[5] = "aborted", aborted_text(pid)
            rows.append(tuple(row))
    print(rows_as(_format(args), columns, rows))
    return EXIT_OK


def cmd_admit(args: argparse.Namespace) -> int:
    from pipeline.planning.admit import admit

    config = _config(args)
    results = [admit(path, config) for path in args.task]  # every file is checked before any is shown
    if args.json:
        _emit_json(results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results])
    else:
        print("\n\n".join(str(r) for r in results))
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from pipeline.common.output_schema import schema

    _emit_json(schema(args.output))
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from pipeline.planning.simulate import write_parquet

    if args.rows < 0 or args.files < 1:
        raise UsageError("--rows must be >= 0 and --files >= 1")
    start = datetime.fromisoformat(args.start) if args.start else None
    paths = write_parquet(args.out, args.release, args.rows, args.scenario, args.seed,
                          start=start, days=args.days, files=args.files, bad_rows=args.bad_rows)
    print(f"wrote {args.rows} rows of scenario {args.scenario} for release {args.release} "
          f"into {len(paths)} files under {args.out}")
    return EXIT_OK


EXAMPLES = {
    "init": "pipeline init --db /data/warehouse/telemetry.duckdb   # creates the folder and an empty warehouse",
    "ingest": "pipeline ingest sample_logs/\npipeline ingest landing/day-2026-11-30.parquet --json",
    "aggregate": "pipeline aggregate\npipeline aggregate --full   # recompute every day, e.g. after a config change",
    "sql": 'pipeline sql "SELECT release, count(*) FROM events GROUP BY ALL" --format table\n'
           'pipeline sql "SELECT * FROM quarantine LIMIT 5" --format json',
    "query": "pipeline query --list\n"
             "pipeline query edge_vs_cloud_latency --param release=4.12 --param since=2026-11-24 --format table",
    "gate": "pipeline gate --release 4.12\npipeline gate --release 4.12 --as-of 2026-12-01 --all --wide\n"
            "pipeline gate --release 4.12 --json --routing-out routing-4.12.json\n"
            "pipeline gate --check-config --config gates/admission.yaml",
    "explain": "pipeline explain --release 4.12 --segment rewrite/low/weak\n"
               "pipeline explain --release 4.12 --segment rewrite/low/weak --json",
    "report": "pipeline report --release 4.12 --out reports/report-4.12.html",
    "ledger": "pipeline ledger --release 4.12 --as-of 2026-12-01\n"
              "pipeline ledger --release 4.12 --candidate gates/candidates/rewrite.yaml --json",
    "state": "pipeline state --release 4.12\npipeline state --release 4.12 --json",
    "backtest": "pipeline backtest --release 4.11 --as-of 2026-12-01 --runs 20\n"
                "pipeline backtest --release 4.11 --segment-rows 400 --inject adoption=0.15 --json\n"
                "pipeline backtest --simulated --runs 100 --jobs 2",
    "history": "pipeline history --release 4.12 --format table",
    "nightly": "pipeline nightly --landing sample_logs --as-of 2026-12-01 --report-dir reports\n"
               "pipeline --log-format json nightly --landing /data/landing --routing-dir /data/routing",
    "schedule": 'pipeline schedule --landing /data/landing --cron "0 2 * * *" --timezone UTC\n'
                "pipeline schedule --landing /data/landing --interval-seconds 3600",
    "runs": "pipeline runs --limit 5 --format table",
    "admit": "pipeline admit gates/candidates/rewrite.yaml\npipeline admit gates/candidates/*.yaml --json",
    "schema": "pipeline schema gate\npipeline schema nightly > nightly.schema.json",
    "simulate": "pipeline simulate --out landing --release 4.13 --rows 50000 --scenario postmortem --seed 1\n"
                "pipeline simulate --out landing --release 4.13 --rows 1000 --bad-rows 20 --files 4",
}


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


def _finish_subcommands(sub: Any) -> None:
    """Every command: an example in its help, and the global options accepted after it too."""
    for name, p in sub.choices.items():
        p.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name].splitlines())
        p.formatter_class = argparse.RawDescriptionHelpFormatter
        _global_options(p, top=False)


def build_parser() -> argparse.ArgumentParser:
    from pipeline.common.output_schema import OUTPUTS

    parser = _Parser(prog="pipeline",
                     description="Telemetry ingestion and rollback gate for on-device language models.",
                     epilog=EXIT_CODES + "; `pipeline COMMAND --help` shows examples")
    parser.add_argument("--version", action="version", version=f"pipeline {__version__}")
    _global_options(parser, top=True)
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file, also taken after the command")
    parser.add_argument("--config", type=Path, default=None, help="gate config, also taken after the command")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("init", help="create a new, empty warehouse (and its folders) at --db")
    _db_option(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("ingest", help="validate and load telemetry Parquet files or folders")
    p.add_argument("paths", nargs="+", type=Path, help="Parquet files, or folders searched for *.parquet")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    _ingest_options(p)
    _config_option(p)
    _as_of_option(p)
    _engine_options(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("aggregate", help="refresh the daily rollup (only days with new rows)")
    _db_option(p)
    _config_option(p)
    p.add_argument("--full", action="store_true", help="recompute every day")
    _as_of_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    _engine_options(p)
    p.set_defaults(func=cmd_aggregate)

    p = sub.add_parser("sql", help="run ad hoc SQL on a read-only connection that cannot write or read files")
    p.add_argument("query", help="SQL; tables: events, events_enriched, rollup_daily, quarantine, files, ...")
    _db_option(p)
    _config_option(p)
    _format_option(p)
    _timeout_option(p)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("query", help="run a named query from sql/queries with bound parameters")
    p.add_argument("name", nargs="?", help="query name (see --list)")
    p.add_argument("--list", action="store_true", help="list the queries, what they show and their parameters")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of the query (repeat for several); its type is checked (see --list)")
    _db_option(p)
    _config_option(p)
    _format_option(p)
    _timeout_option(p)
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
    p.add_argument("--dry-run", action="store_true",
                   help="compute and print only: store no evaluation, advance no rollout state, raise no alert")
    p.add_argument("--trigger", choices=["ci", "nightly", "manual"],
                   help="recorded with the evaluation (default: ci when $CI is set, else manual)")
    p.add_argument("--all", action="store_true", help="list the insufficient-data segments too (else summarised)")
    p.add_argument("--wide", action="store_true", help="every gate column, under the gates' full names, any width")
    p.add_argument("--no-color", action="store_true", help="no colour (also: the NO_COLOR environment variable)")
    _engine_options(p)
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("explain", help="every gate's figures for one segment, and why it decided so")
    p.add_argument("--release", required=True, help="the release, e.g. 4.12")
    p.add_argument("--segment", required=True, metavar="TASK/TIER/BUCKET", help="e.g. rewrite/mid/weak")
    p.add_argument("--json", action="store_true", help="the figures as one JSON object, with their units")
    p.add_argument("--no-color", action="store_true", help="no colour (also: the NO_COLOR environment variable)")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    _engine_options(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("report", help="write a self-contained HTML page of a release's gate evaluation, with charts")
    p.add_argument("--release", required=True, help="the release, e.g. 4.12")
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
    shape = p.add_argument_group("--simulated releases shaped like yours (any of these: A/A, and adoption losses of "
                                 "3, 10 and 15 %% on that population; unset knobs take the grey-release defaults)")
    shape.add_argument("--devices", type=int, help="devices in the population (default 2,400)")
    shape.add_argument("--concentration", type=float,
                       help="per-device adoption propensity Beta(c p, c (1 - p)): 1 very dispersed, 50 alike (5)")
    shape.add_argument("--pareto", type=float, help="Pareto tail index of activity, 1.1-3 (default 1.3)")
    shape.add_argument("--activity-sigma", type=float, help="lognormal sigma of activity instead of --pareto")
    shape.add_argument("--holdback", type=float, help="share of devices in the cloud hold-back (default 0.2)")
    shape.add_argument("--arrival-days", type=float, help="devices join over the first N days (default 7)")
    shape.add_argument("--chatty", type=float, help="share of devices with 30 x the activity (default 0.002)")
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

    p = sub.add_parser("history", help="the stored gate verdicts of a release over time")
    p.add_argument("--release", required=True, help="the release, e.g. 4.12")
    _db_option(p)
    _format_option(p)
    p.add_argument("--limit", type=int, default=20, help="the newest N evaluations (default 20)")
    p.add_argument("--json", action="store_true", help="a JSON list (same as --format json)")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("state", help="the rollout state of each segment of a release, its route and why")
    p.add_argument("--release", required=True)
    _db_option(p)
    _config_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_state)

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

    p = sub.add_parser("runs", help="recent job runs and their outcome")
    _db_option(p)
    p.add_argument("--limit", type=int, default=20, help="how many runs, newest first (default 20)")
    _format_option(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("admit", help="before launch: score a candidate task for the edge and predict its budgets")
    p.add_argument("task", type=Path, nargs="+", help="candidate task YAML files (examples in gates/candidates/)")
    _config_option(p)
    p.add_argument("--json", action="store_true", help="JSON: one object, or a list for several files")
    p.set_defaults(func=cmd_admit)

    p = sub.add_parser("schema", help="print the JSON Schema of a --json output (each output has schema_version)")
    p.add_argument("output", choices=OUTPUTS)
    p.set_defaults(func=cmd_schema)

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
    p.set_defaults(func=cmd_simulate)
    _finish_subcommands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    batch_rows = getattr(args, "validate_batch_rows", None)
    if batch_rows is not None and batch_rows < 1:
        parser.error("--validate-batch-rows must be >= 1")
    for option, least in (("reader_timeout", 0), ("reader_memory", 64)):
        value = getattr(args, option, None)
        if value is not None and value <= least:
            parser.error(f"--{option.replace('_', '-')} must be > {least}")
    if args.busy_timeout is not None and args.busy_timeout < 0:
        parser.error("--busy-timeout must be >= 0 seconds")
    from pipeline.common import logs
    from pipeline.warehouse import db

    db.set_busy_timeout(args.busy_timeout)
    logs.setup(args.log_format)
    from pipeline.common import stopping

    if args.command in ("ingest", "nightly", "aggregate"):
        stopping.install()  # SIGTERM/SIGINT: finish the file in hand, then stop
    elif args.command in ("sql", "query"):
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # like Ctrl-C: interrupt the query, exit 130
    try:
        return func(args)
    except stopping.Interrupted:
        print(f"pipeline {args.command}: stopped by a signal after the last whole file; run it again to finish",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except PipelineError as exc:
        if getattr(args, "debug", False) or os.environ.get("PIPELINE_DEBUG"):
            traceback.print_exc()  # with the cause it chains (e.g. what GX swallowed)
        print(f"pipeline {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # e.g. `| head`: not a verdict, so never 0 or 1
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"pipeline {args.command}: output closed early (broken pipe)", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        if args.command in ("sql", "query"):
            print(f"pipeline {args.command}: interrupted; the query was stopped", file=sys.stderr)
        else:
            print(f"pipeline {args.command}: {HARD_STOP}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the one boundary: a crash must never look like exit 1 (rollback)
        if args.debug or os.environ.get("PIPELINE_DEBUG"):
            traceback.print_exc()
        if stopping.stop_requested():  # e.g. a second signal inside DuckDB comes back as "Query interrupted"
            print(f"pipeline {args.command}: {HARD_STOP}", file=sys.stderr)
            return EXIT_INTERRUPTED
        failure = db.storage_failure(_db(args), exc) if hasattr(args, "db") else None
        if failure:
            print(f"pipeline {args.command}: error: {failure}", file=sys.stderr)
            return EXIT_ERROR
        print(f"pipeline {args.command}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())} "
              "(rerun with --debug for the traceback)", file=sys.stderr)
        return EXIT_ERROR


def run() -> None:
    code = main()
    # The work is done and `code` is decided. Leave at once: a signal storm during interpreter shutdown
    # would otherwise turn it into a kill by SIGINT, and a DuckDB worker thread still winding down an
    # interrupted query can abort the process when its connection is finalized.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: main() already reported it
            pass
    os._exit(code)
