"""The `pipeline` command: parse options, call one core function, render its result.

Exit codes: pipeline/common/exit_codes.py (every command; the README lists them).
Heavy modules (Great Expectations, the gate) are imported inside the commands
that need them, so `pipeline --help` and `pipeline gate` start fast.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.cli import data, gate, jobs, planning, rollout
from pipeline.cli.common import (
    HARD_STOP,
    _db,
    _global_options,
    _Parser,
)
from pipeline.common.errors import PipelineError
from pipeline.common.exit_codes import SUMMARY, Exit

EXAMPLES = {
    "init": "pipeline init --db /data/warehouse/telemetry.duckdb   # creates the folder and an empty warehouse",
    "ingest": "pipeline ingest sample_logs/\npipeline ingest landing/day-2026-11-30.parquet --json\n"
              "pipeline ingest s3://telemetry-landing/uploads/   # credentials: the AWS chain (docs/landing.md)",
    "aggregate": "pipeline aggregate\npipeline aggregate --full   # recompute every day, e.g. after a config change",
    "archive": "pipeline archive   # the nightly job runs it after the gate\n"
               "pipeline archive --as-of 2026-12-01 --json",
    "sql": 'pipeline sql "SELECT release, count(*) FROM events GROUP BY ALL" --format table\n'
           'pipeline sql "SELECT * FROM quarantine LIMIT 5" --format json',
    "query": "pipeline query --list\n"
             "pipeline query edge_vs_cloud_latency --param release=4.12 --param since=2026-11-24 --format table",
    "gate": "pipeline gate --release 4.12\npipeline gate --release 4.12 --as-of 2026-12-01 --all --wide\n"
            "pipeline gate --release 4.12 --json --routing-out routing-4.12.json\n"
            "pipeline gate --check-config --config gates/admission.yaml",
    "drill": "pipeline drill --release 4.12\n"
             "pipeline drill --release 4.12 --segment rewrite/low/normal --gate kill_rate --by soc,npu_ready\n"
             "pipeline drill --release 4.12 --all --json   # every judged segment",
    "compare": "pipeline compare --release 4.12 --against 4.11\n"
               "pipeline compare --release 4.12 --against 4.11 --by soc,npu_ready --json",
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
    "rollout": "pipeline rollout rollback --release 4.12 --segment rewrite/low/weak --reason pagerduty:INC123\n"
               "pipeline rollout pause --release 4.12 --reason 'holiday freeze' --until 2027-01-04\n"
               "pipeline rollout promote --release 4.12 --segment rewrite/flagship/normal --gate thermal "
               "--reason 'known thermal on flagships, fix in 4.13' --until 2026-12-20\n"
               "pipeline rollout resume --release 4.12 --reason 'freeze over'",
    "routing": "pipeline routing publish --release 4.12\n"
               "pipeline routing history --release 4.12\n"
               "pipeline routing rollback --release 4.12 --to 3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY --reason INC123",
    "nightly": "pipeline nightly --landing sample_logs --as-of 2026-12-01 --report-dir reports\n"
               "pipeline --log-format json nightly --landing /data/landing --routing-dir /data/routing\n"
               "pipeline nightly --landing s3://telemetry-landing/uploads/ --db /data/telemetry.duckdb",
    "look": "pipeline look --landing /data/landing --db /data/telemetry.duckdb\n"
            "pipeline look --landing sample_logs --as-of '2026-11-30 10:15'",
    "schedule": 'pipeline schedule --landing /data/landing --cron "0 2 * * *" --timezone UTC\n'
                "pipeline schedule --landing /data/landing --look-every 15m\n"
                "pipeline schedule --landing /data/landing --interval-seconds 3600",
    "serve": "pipeline serve --port 8080\n"
             "PIPELINE_SERVE_TOKEN=... pipeline serve --host 0.0.0.0 --port 8080 --db /data/telemetry.duckdb",
    "metrics": "pipeline metrics\npipeline metrics --textfile /var/lib/node_exporter/textfile/edge_pipeline.prom",
    "alerts": "pipeline alerts test --dry-run\npipeline alerts test --sink oncall",
    "runs": "pipeline runs --limit 5 --format table",
    "admit": "pipeline admit gates/candidates/rewrite.yaml\npipeline admit gates/candidates/*.yaml --json",
    "schema": "pipeline schema gate\npipeline schema nightly > nightly.schema.json",
    "simulate": "pipeline simulate --out landing --release 4.13 --rows 50000 --scenario postmortem --seed 1\n"
                "pipeline simulate --out landing --release 4.13 --rows 1000 --bad-rows 20 --files 4",
}


def _finish_subcommands(sub: Any) -> None:
    """Every command: an example in its help, and the global options accepted after it too."""
    for name, p in sub.choices.items():
        p.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name].splitlines())
        p.formatter_class = argparse.RawDescriptionHelpFormatter
        _global_options(p, top=False)


def build_parser() -> argparse.ArgumentParser:

    parser = _Parser(prog="pipeline",
                     description="Telemetry ingestion and rollback gate for on-device language models.",
                     epilog=SUMMARY + "; `pipeline COMMAND --help` shows examples")
    parser.add_argument("--version", action="version", version=f"pipeline {__version__}")
    _global_options(parser, top=True)
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file, also taken after the command")
    parser.add_argument("--config", type=Path, default=None, help="gate config, also taken after the command")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    for group in (data, jobs, gate, rollout, planning):
        group.add_commands(sub)
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
    from pipeline.warehouse import db, snapshots

    db.set_busy_timeout(args.busy_timeout)
    logs.setup(args.log_format)
    from pipeline.common import stopping

    if args.command in ("ingest", "nightly", "look", "aggregate", "archive"):
        stopping.install()  # SIGTERM/SIGINT: finish the file in hand, then stop
    elif args.command in ("sql", "query"):
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # like Ctrl-C: interrupt the query, exit 130
    try:
        snapshots.keep()  # a wrong PIPELINE_SNAPSHOTS is a usage error of every command, not a writer's warning
        with db.one_source():
            code = func(args)
            for snapshot, holder in db.served():
                print(f"pipeline {args.command}: read {snapshot.describe()}: the warehouse was being written "
                      f"({holder})", file=sys.stderr)
            return code
    except stopping.Interrupted:
        print(f"pipeline {args.command}: stopped by a signal after the last whole file; run it again to finish",
              file=sys.stderr)
        return Exit.INTERRUPTED
    except PipelineError as exc:
        if getattr(args, "debug", False) or os.environ.get("PIPELINE_DEBUG"):
            traceback.print_exc()  # with the cause it chains (e.g. what GX swallowed)
        print(f"pipeline {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # e.g. `| head`: the reader has what it wanted, so silent; not a verdict, so never 0 or 1
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.ERROR
    except KeyboardInterrupt:
        if args.command in ("sql", "query"):
            print(f"pipeline {args.command}: interrupted; the query was stopped", file=sys.stderr)
        else:
            print(f"pipeline {args.command}: {HARD_STOP}", file=sys.stderr)
        return Exit.INTERRUPTED
    except Exception as exc:  # the one boundary: a crash must never look like exit 1 (rollback)
        if args.debug or os.environ.get("PIPELINE_DEBUG"):
            traceback.print_exc()
        if stopping.stop_requested():  # e.g. a second signal inside DuckDB comes back as "Query interrupted"
            print(f"pipeline {args.command}: {HARD_STOP}", file=sys.stderr)
            return Exit.INTERRUPTED
        failure = db.storage_failure(_db(args), exc) if hasattr(args, "db") else None
        if failure:
            print(f"pipeline {args.command}: error: {failure}", file=sys.stderr)
            return Exit.ERROR
        print(f"pipeline {args.command}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())} "
              "(rerun with --debug for the traceback)", file=sys.stderr)
        return Exit.ERROR


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
