"""What every command group shares: the parser, the common options, and reading the arguments
(the database, the config, the engine, the clock) into what the commands pass on."""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.common.errors import UsageError
from pipeline.common.exit_codes import Exit

HARD_STOP = "stopped by a signal at once; the transaction in flight was rolled back, whole files are in; " \
            "run it again to finish"




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
        self.exit(Exit.ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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


def _holdback_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--holdback-share", type=_share, default=None, metavar="SHARE",
                   help="the cloud hold-back share this release declares, 0-1 (default: assignment.holdback_share of "
                        "the config); the assignment check holds the data to it")


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a share: {text!r} (a number from 0 to 1)") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"not a share: {text!r} (a number from 0 to 1)")
    return value


def _landing(text: str) -> Path | str:
    """A landing argument: an s3:// URI stays text (a Path would fold its `//`), anything else is a path."""
    from pipeline.ingest.object_store import is_uri

    return text if is_uri(text) else Path(text)


def _check_landings(landings: list[Path | str], engine: str, folders_only: bool = False) -> None:
    """Each landing is one the chosen engine reads (`folders_only`: a local one must be a folder), before any work."""
    from pipeline.ingest.object_store import parse_uri

    for landing in landings:
        if isinstance(landing, str):
            uri = parse_uri(landing)
            if engine == "spark":
                raise UsageError(f"{landing}: the Spark engine reads local or Spark-readable paths; an "
                                 f"{uri.scheme}:// landing is read by the DuckDB engine (--engine duckdb)")
        elif folders_only and not landing.is_dir():
            raise UsageError(f"--landing {landing} is not a folder")
        elif not landing.exists():  # before the warehouse is opened: a mistyped path creates nothing
            from pipeline.ingest.landing import shown

            raise UsageError(f"no such file or folder: {shown(landing)}")


def _ingest_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--relist", action="store_true",
                   help="list an s3:// landing whole, not from the date folder of the last key seen (finds objects "
                        "written late into older folders; objects read before are still not fetched again)")
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
def _telemetry(args: argparse.Namespace, config: Any, raw: bool = True) -> Iterator[Any]:
    """Where the command reads events: the Spark engine, or a read-only connection to the DuckDB warehouse
    (`raw`: the file itself, never a snapshot; see _warehouse)."""
    spark = _spark(args, config)
    if spark is not None:
        yield spark
        return
    with _warehouse(args, config, raw=raw) as con:
        yield con


def _config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                   help="gate config (default: $PIPELINE_CONFIG, else the shipped gates/admission.yaml)")


def _db(args: argparse.Namespace) -> Path:
    from pipeline.warehouse.db import default_db_path

    return args.db or default_db_path()


def _show_published(published: list[Any], json_out: bool = False) -> bool:
    """Each routing publish's line (delivery/publish.Published): failures on stderr, and every line there when
    stdout carries JSON; True when one failed."""
    for p in published:
        print(p, file=sys.stderr if json_out or p.outcome == "failed" else sys.stdout)
    return any(p.outcome == "failed" for p in published)


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def _show(args: argparse.Namespace, result: Any) -> None:
    """A result object: its to_dict() under --json, else its text."""
    if args.json:
        _emit_json(result.to_dict())
    else:
        print(result)


class _Progress:
    """A progress bar on stderr (tqdm), only on a terminal and only for enough items: nothing in pipes, logs or
    --json. Called with (done, total, what is being done): a file's path or a label."""

    def __init__(self, unit: str = "file", min_items: int = 4):
        self.enabled = sys.stderr.isatty()
        self.unit, self.min_items = unit, min_items
        self.bar: Any = None

    def __call__(self, done: int, total: int, doing: Path | str) -> None:
        if not self.enabled or total < self.min_items:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=self.unit, file=sys.stderr, dynamic_ncols=True)
        from pipeline.ingest.landing import shown

        self.bar.set_postfix_str(shown(doing.name if isinstance(doing, Path) else doing)[:40], refresh=False)
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.bar.close()


def _config(args: argparse.Namespace):
    from pipeline.common.config import load_config

    return load_config(getattr(args, "config", None))


def _refresh_rollup(args: argparse.Namespace, config: Any, full: bool = False, spark: Any = None,
                    warehouse: Any = None):
    """The rollup refreshed, through the command's warehouse handle when it has one."""
    if spark is not None:
        from pipeline.warehouse.spark.aggregate import refresh_spark

        return refresh_spark(warehouse or _db(args), spark, config, full=full, now=_as_of(args))
    from pipeline.warehouse.aggregate import refresh

    return refresh(warehouse or _db(args), config, full=full, now=_as_of(args))


@contextmanager
def _warehouse(args: argparse.Namespace, config: Any, sandbox: bool = False, raw: bool = False,
               archived: bool = False) -> Iterator[Any]:
    """A read-only connection whose derived fields (network buckets, cap) follow `config`. `raw`: it reads raw
    rows, so it reads the warehouse file, never a snapshot (pipeline/warehouse/snapshots.py). `archived`: with the
    archive's days beside the file's rows (all_events, all_quarantine: pipeline/warehouse/archive.py)."""
    from pipeline.warehouse import archive, db
    from pipeline.warehouse.aggregate import use_settings

    with db.reading(_db(args), sandbox=sandbox, raw=raw) as con:
        use_settings(con, config)
        if archived:
            archive.register(con, _db(args), config)
        yield con


def _evaluate(args: argparse.Namespace, config: Any, con: Any) -> Any:
    from pipeline.gate.evaluate import evaluate_gate
    from pipeline.warehouse import db

    result = evaluate_gate(con, args.release, config, as_of=_as_of(args),
                           holdback_share=getattr(args, "holdback_share", None),
                           from_events=getattr(args, "from_events", False))
    result.snapshot = db.served_dict(_db(args))
    return result


def _format(args: argparse.Namespace) -> str:
    return args.format or ("table" if sys.stdout.isatty() else "csv")


def _timeout(args: argparse.Namespace) -> float:
    from pipeline.warehouse.adhoc import default_timeout

    if args.timeout is None:
        return default_timeout()
    if args.timeout < 0:
        raise UsageError("--timeout must be >= 0 seconds (0 = no limit)")
    return args.timeout


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
