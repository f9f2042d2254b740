"""The data commands: init, ingest, aggregate, sql, query and schema."""

from __future__ import annotations

import argparse
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
    _format,
    _format_option,
    _ingest_options,
    _landing,
    _Progress,
    _reader_limits,
    _refresh_rollup,
    _require_release,
    _show,
    _spark,
    _timeout,
    _timeout_option,
    _warehouse,
)
from pipeline.common.errors import UsageError
from pipeline.common.exit_codes import Exit


def cmd_init(args: argparse.Namespace) -> int:
    from pipeline.warehouse.db import init_warehouse

    path = _db(args)
    if init_warehouse(path):
        print(f"created a new warehouse at {path}")
    else:
        print(f"{path} is already a warehouse; its tables are in place")
    return Exit.OK


def cmd_ingest(args: argparse.Namespace) -> int:
    from pipeline.common import clock
    from pipeline.ingest.data_quality import batch_problems
    from pipeline.ingest.run import DEFAULT_BATCH_ROWS, ingest
    from pipeline.warehouse.handle import Warehouse

    config = _config(args)  # a bad config fails before any work
    _check_landings(args.paths, _engine_name(args, config))
    spark = _spark(args, config)
    with Warehouse(_db(args), "ingest") as wh, _announce_new_warehouse(args):
        progress = None if args.json else _Progress()
        if spark is not None:
            from pipeline.ingest.spark import ingest_spark

            result = ingest_spark(wh, spark, args.paths, now=_as_of(args), progress=progress)
        else:
            result = ingest(wh, args.paths, now=_as_of(args), progress=progress,
                            batch_rows=args.validate_batch_rows or DEFAULT_BATCH_ROWS, reader=_reader_limits(args),
                            landing=config.landing, relist=args.relist)
        rollup = _refresh_rollup(args, config, spark=spark, warehouse=wh)
    loaded = result.to_dict()
    found = batch_problems(loaded, config, clock.now(_as_of(args)))
    if args.json:
        _emit_json({**loaded, "rollup": rollup.to_dict(), "data_quality": [p["text"] for p in found]})
    else:
        print(result)
        print(rollup)
        for problem in found:
            print(f"DATA QUALITY: {problem['text']}")
    return Exit.DATA_QUALITY if found else Exit.OK


def cmd_aggregate(args: argparse.Namespace) -> int:
    config = _config(args)
    spark = _spark(args, config)
    result = _refresh_rollup(args, config, full=args.full, spark=spark)
    _show(args, result)
    return Exit.OK


def cmd_archive(args: argparse.Namespace) -> int:
    config = _config(args)
    if _engine_name(args, config) == "spark":  # no Spark session: pyarrow moves the partitions
        from pipeline.warehouse.spark.archive import age_out_spark
        from pipeline.warehouse.spark.storage import tables_of

        tables = tables_of(_db(args), config, args.warehouse)
        _show(args, age_out_spark(_db(args), tables, config, now=_as_of(args)))
        return Exit.OK
    from pipeline.warehouse.archive import age_out

    _show(args, age_out(_db(args), config, now=_as_of(args)))
    return Exit.OK


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
    from pipeline.warehouse.snapshots import reads_raw_rows

    raw = reads_raw_rows(args.query)  # all_events and all_quarantine are among the raw readers
    with _warehouse(args, _config(args), sandbox=True, raw=raw, archived=raw) as con:
        check_read_statement(con, args.query)
        try:
            _print_limited(args, con, args.query)
        except duckdb.Error as exc:
            raise UsageError(_sql_error(exc)) from None
    return Exit.OK


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
        return Exit.OK
    q = sqlfiles.named_query(args.name, hint="see pipeline query --list (")
    bound = sqlfiles.query_params(q, sqlfiles.convert_params(q, _params(args.param, sqlfiles.param_names(q))),
                                  spelled="--param {}=...")
    from pipeline.warehouse.snapshots import reads_raw_rows

    raw = reads_raw_rows(q.text)
    with _warehouse(args, _config(args), raw=raw, archived=raw) as con:
        if bound.get("release") is not None:
            _require_release(con, bound["release"])
        _print_limited(args, con, q.text, bound)
    return Exit.OK


def cmd_schema(args: argparse.Namespace) -> int:
    from pipeline.common.output_schema import schema

    _emit_json(schema(args.output))
    return Exit.OK


def add_commands(sub: Any) -> None:
    """This group's subcommands, in the order `pipeline --help` lists them."""
    from pipeline.common.output_schema import OUTPUTS

    p = sub.add_parser("init", help="create a new, empty warehouse (and its folders) at --db")
    _db_option(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("ingest", help="validate and load telemetry Parquet files or folders")
    p.add_argument("paths", nargs="+", type=_landing,
                   help="Parquet files, folders searched for *.parquet, or s3://bucket/prefix (docs/landing.md)")
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

    p = sub.add_parser("archive", help="move raw events and quarantined rows older than the config's archive "
                                       "settings to the archive (Delta Lake tables; docs/archive.md); idempotent")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    p.add_argument("--engine", choices=["duckdb", "spark"], default=None,
                   help="where the raw rows live (default: engine.name of the config); spark moves the Spark "
                        "warehouse's partitions, without starting a session")
    p.add_argument("--warehouse", metavar="DIR|URI", default=None,
                   help="root of the Spark tables (default: engine.spark.warehouse, else <db>.spark beside --db)")
    p.set_defaults(func=cmd_archive)

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

    p = sub.add_parser("schema", help="print the JSON Schema of a --json output (each output has schema_version)")
    p.add_argument("output", choices=OUTPUTS)
    p.set_defaults(func=cmd_schema)
