"""The gate commands: gate (the release gate of CI), explain, drill, compare, report, state, history and runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pipeline.cli.common import (
    _as_of,
    _as_of_option,
    _config,
    _config_option,
    _db,
    _db_option,
    _emit_json,
    _engine_options,
    _evaluate,
    _format,
    _format_option,
    _holdback_option,
    _require_release,
    _show_published,
    _telemetry,
    _warehouse,
)
from pipeline.common.errors import UsageError
from pipeline.common.exit_codes import Exit


def cmd_gate(args: argparse.Namespace) -> int:
    config = _config(args)
    if args.check_config:
        print(f"{config.source}: ok (digest {config.digest})")
        return Exit.OK
    if not args.release:
        raise UsageError("--release is required (or --check-config)")
    from pipeline.jobs.judge import judge
    from pipeline.rollout import state as rollout_state
    from pipeline.rollout.history import default_trigger
    from pipeline.warehouse.handle import Warehouse

    # the command's handle: it takes the writer lock only to record and to deliver, never waiting for it
    wh = Warehouse(_db(args), "gate")
    # events and rollups on Spark or in the DuckDB file; rollout state in the DuckDB file either way
    [judged] = judge(wh, lambda: _telemetry(args, config, raw=args.from_events), [args.release], config,
                     as_of=_as_of(args), trigger=args.trigger or default_trigger(),
                     holdback_share=args.holdback_share, from_events=args.from_events, dry_run=args.dry_run,
                     served=True, routing_out=lambda _: args.routing_out,
                     publishing=bool(args.routing_out or args.publish))
    result = judged.result
    _show_gate(args, result, judged.story)
    _write_ci_reports(args, result, judged.story)
    if judged.recorded is None:
        print(f"pipeline gate: dry run: nothing stored, no alert; rollout would be: "
              f"{rollout_state.describe(judged.states, config)}", file=sys.stderr)
    else:
        for warning in judged.recorded.warnings:
            print(f"pipeline gate: warning: {warning}", file=sys.stderr)
        if not judged.recorded:
            print("pipeline gate: another writer is busy; this evaluation and its alert are stored by the next one",
                  file=sys.stderr)
        else:
            if not args.json:
                import textwrap

                from pipeline.views.terminal import terminal_width

                line = (f"rollout of release {result.release} now: {rollout_state.describe(judged.states, config)} "
                        f"(pipeline state --release {result.release})")
                width = terminal_width(sys.stdout)  # wrapped like the gate view above it, not cut
                print(textwrap.fill(line, width, subsequent_indent="  ") if width else line)
            _show_published(judged.published, args.json)
            if not args.no_alerts:
                _deliver_alerts(args, config, wh)
    if any(p.outcome == "failed" for p in judged.published):  # the decision is stored; the phones do not have it
        print(f"pipeline gate: routing not published; `pipeline routing publish --release {result.release}` "
              "tries again (so does the next gate or nightly)", file=sys.stderr)
        return Exit.ERROR
    return result.exit_code  # a failed delivery is reported, but the exit code is the verdict's


def _write_ci_reports(args: argparse.Namespace, result: Any, story: Any) -> None:
    """--junit and --summary-md (or $GITHUB_STEP_SUMMARY): the same verdict in the shapes CI reads."""
    import os

    summary = args.summary_md or (Path(os.environ["GITHUB_STEP_SUMMARY"])
                                  if os.environ.get("GITHUB_STEP_SUMMARY") else None)
    if args.junit is None and summary is None:
        return
    from pipeline.views.ci import junit_xml, step_summary

    told = result.to_dict()
    try:
        if args.junit is not None:
            args.junit.parent.mkdir(parents=True, exist_ok=True)
            args.junit.write_text(junit_xml(told, story), encoding="utf-8")
        if summary is not None:
            with summary.open("a", encoding="utf-8") as out:  # a step's summary file is shared by its commands
                out.write(step_summary(told, story))
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}") from None


def _show_gate(args: argparse.Namespace, result: Any, story: Any) -> None:
    """--json: the contract's object; else the view for people (pipeline/views/terminal.py)."""
    if args.json:
        _emit_json(result.to_dict())
        return
    from pipeline.views.terminal import gate_view, terminal_width, wants_colour

    print(gate_view(result, story, width=terminal_width(sys.stdout), colour=wants_colour(sys.stdout, args.no_color),
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


def cmd_explain(args: argparse.Namespace) -> int:
    from pipeline.gate.drill import READS, drill, parse_dimensions
    from pipeline.views.drill import drill_lines
    from pipeline.views.terminal import explain_dict, explain_view, terminal_width, wants_colour

    config = _config(args)
    with _telemetry(args, config) as source:
        result = _evaluate(args, config, source)
        match = [s for s in result.segments if s.key == args.segment]
        found = None
        if match and any(g in READS for g in match[0].failed_gates):  # where its failure is (pipeline drill)
            found = drill(source, result, config, parse_dimensions(None), segments=[args.segment])
    if not match:
        known = ", ".join(s.key for s in result.segments) or "none"
        if len(args.segment.split("/")) != 3:
            raise UsageError(f"--segment {args.segment!r} is not of the form TASK/TIER/BUCKET "
                             f"(e.g. rewrite/mid/weak); segments of release {args.release}: {known}")
        raise UsageError(f"no segment {args.segment!r} in release {args.release}; segments: {known}")
    standing = _rollout_of(args, config, args.segment)
    if args.json:
        out = explain_dict(result, match[0], config)
        out["drill"] = found.to_dict() if found else None
        out["rollout"] = standing
        _emit_json(out)
    else:
        width = terminal_width(sys.stdout)
        print(explain_view(result, match[0], config, width=width, colour=wants_colour(sys.stdout, args.no_color)))
        if standing:
            import textwrap

            line = (f"rollout: {standing['state']}, route {standing['route']}: {standing['route_reason']}"
                    + (f"; held: {standing['held']}" if standing["held"] else ""))
            print(textwrap.fill(line, width, subsequent_indent="  ") if width else line)
        if found:
            print("\n".join(drill_lines(found, args.segment, width=width)))
    return Exit.OK


def _rollout_of(args: argparse.Namespace, config: Any, segment: str) -> dict[str, Any] | None:
    """The segment's stored rollout state now, with the people's override beside the gate's own view."""
    from pipeline.common import clock
    from pipeline.rollout import state as rollout_state
    from pipeline.rollout.actions import recorded
    from pipeline.warehouse import db

    with db.reading(_db(args)) as con:
        states = rollout_state.current(con, args.release, config, clock.now(_as_of(args)),
                                 recorded(con, args.release, _db(args)))
    return rollout_state.standing(segment, states, config) if segment in states else None


def cmd_drill(args: argparse.Namespace) -> int:
    from pipeline.gate.drill import drill, parse_dimensions
    from pipeline.views.drill import drill_text
    from pipeline.views.terminal import terminal_width

    config = _config(args)
    by = parse_dimensions(args.by)
    with _telemetry(args, config) as source:
        result = _evaluate(args, config, source)
        found = drill(source, result, config, by, segments=args.segment, gates=args.gate, every_segment=args.all)
    if args.json:
        _emit_json(found.to_dict())
    else:
        print(drill_text(found, width=terminal_width(sys.stdout)))
    return Exit.OK


def cmd_compare(args: argparse.Namespace) -> int:
    from pipeline.gate.compare import compare, parse_matching
    from pipeline.views.compare import compare_text
    from pipeline.views.terminal import terminal_width

    config = _config(args)
    by = parse_matching(args.by)
    if args.against == args.release:
        raise UsageError(f"--against {args.against!r} is the release itself; name the previous release")
    with _telemetry(args, config) as source:
        candidate = _evaluate(args, config, source)
        previous = _evaluate(argparse.Namespace(**{**vars(args), "release": args.against}), config, source)
        found = compare(source, candidate, previous, config, by)
    if args.json:
        _emit_json(found.to_dict())
    else:
        print(compare_text(found, width=terminal_width(sys.stdout), show_all=args.all))
    return Exit.OK


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.views.report import report_filename, write_report

    config = _config(args)
    with _warehouse(args, config, raw=True) as con:  # its latency and heat charts read raw events
        result = _evaluate(args, config, con)
        path = write_report(con, args.release, config, args.out or Path(report_filename(args.release)),
                            result=result, candidates=args.candidate)
    print(f"wrote {path} (release {result.release}: {result.verdict})")
    return Exit.OK


def cmd_history(args: argparse.Namespace) -> int:
    from pipeline.common.tables import rows_as
    from pipeline.rollout.actions import recorded
    from pipeline.rollout.history import action_rows, history, intraday_history
    from pipeline.warehouse import db

    if args.limit < 1:
        raise UsageError("--limit must be >= 1")
    with db.reading(_db(args)) as con:
        _require_release(con, args.release)
        acts = recorded(con, args.release, _db(args))
        columns, rows = history(con, args.release, args.limit, acts)
        looks = intraday_history(con, args.release, args.limit)
    fmt = "json" if args.json else _format(args)
    print(rows_as(fmt, columns, rows))
    if looks[1] and fmt == "table":  # csv and json keep one table: the whole-day evaluations
        print("\nintra-day looks (pipeline look), newest first:")
        print(rows_as(fmt, *looks))
    if acts and fmt == "table":  # csv and json keep one table: their `overrides` column names the actions
        print("\npeople's actions (pipeline rollout), newest first:")
        print(rows_as(fmt, *action_rows(acts)))
    return Exit.OK


def cmd_state(args: argparse.Namespace) -> int:
    from pipeline.common import clock
    from pipeline.rollout import state as rollout_state
    from pipeline.rollout.actions import recorded
    from pipeline.rollout.previous import find
    from pipeline.views.render import intraday_latency, last_published
    from pipeline.warehouse import db

    config = _config(args)
    with db.reading(_db(args)) as con:
        acts = recorded(con, args.release, _db(args))
        states = rollout_state.current(con, args.release, config, clock.now(_as_of(args)), acts)
        view = rollout_state.StateView(args.release, states, config, find(con, args.release, config),
                                       db.served_dict(_db(args)), acts, last_published(con, args.release),
                                       intraday_latency(con, args.release))
    if args.json:
        _emit_json(view.to_dict())
    else:
        from pipeline.views.render import state_text

        print(state_text(view))
    return Exit.OK


def cmd_runs(args: argparse.Namespace) -> int:
    from pipeline.common.tables import rows_as
    from pipeline.warehouse import db, sqlfiles
    from pipeline.warehouse.runs import aborted_text, alive

    with db.reading(_db(args)) as con:
        cur = sqlfiles.run(con, "ingest/recent_runs", {"limit": args.limit})
        columns = [d[0] for d in cur.description][:-3]
        status, error = columns.index("status"), columns.index("error")
        rows = []
        for *row, pid, host, proc_start in cur.fetchall():  # a run whose process died reads as aborted at once
            if row[status] == "running" and not alive(pid, host, proc_start):
                row[status], row[error] = "aborted", aborted_text(pid)
            rows.append(tuple(row))
    print(rows_as(_format(args), columns, rows))
    return Exit.OK


def add_commands(sub: Any) -> None:
    """This group's subcommands, in the order `pipeline --help` lists them."""
    p = sub.add_parser("gate", help="decide keep edge / roll back to cloud per segment of a release",
                       description="Exit status: 0 keep_edge, 1 partial_rollback or rollback_to_cloud, "
                                   "2 usage or input error, 3 insufficient_data.")
    p.add_argument("--release", help="the release to judge, e.g. 4.12 (matches the release column exactly)")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    _holdback_option(p)
    p.add_argument("--json", action="store_true", help="print the contract's JSON object")
    p.add_argument("--from-events", action="store_true",
                   help="roll the window's events up for this evaluation instead of reading the stored rollups "
                        "(an audit of the rollup; DuckDB)")
    p.add_argument("--routing-out", type=Path, help="write the routing table the app consumes to this file (and "
                                                    "publish it to the config's publish.targets)")
    p.add_argument("--publish", action="store_true", help="publish the routing table to the config's "
                                                          "publish.targets (docs/publishing.md) without a file")
    p.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML report: a testcase per "
                   "segment, failed when its own gates fail, skipped when not judged (GitLab, Jenkins)")
    p.add_argument("--summary-md", type=Path, metavar="FILE", help="also append a Markdown summary to FILE (default: "
                   "$GITHUB_STEP_SUMMARY when set, as in a GitHub Actions step)")
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
    _holdback_option(p)
    _engine_options(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("drill", help="the device-matrix cells (chip, OS, memory, NPU, model, app build) behind a "
                                     "failing segment",
                       description="Splits each failing segment's failed gates (or the chosen ones) by device "
                                   "dimensions: per cell the gate's figure, its interval, its share of the "
                                   "segment's excess, and a flag when it fails on its own (docs/drill-down.md). "
                                   "Exit status: 0, or 2 for a usage error.")
    p.add_argument("--release", required=True, help="the release, e.g. 4.12")
    p.add_argument("--segment", action="append", default=[], metavar="TASK/TIER/BUCKET",
                   help="drill this segment (repeatable; default: every segment that rolls back)")
    p.add_argument("--gate", action="append", default=[], metavar="GATE",
                   help="drill this gate (repeatable; default: the segment's failed gates)")
    p.add_argument("--by", metavar="DIMS", help="comma-separated: soc, os_version, mem_class_gb, npu_ready, "
                                                "model_id, app_version (default: all of them)")
    p.add_argument("--all", action="store_true", help="every judged segment, failing or not")
    p.add_argument("--json", action="store_true", help="one JSON object")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    _holdback_option(p)
    _engine_options(p)
    p.set_defaults(func=cmd_drill)

    p = sub.add_parser("compare", help="the candidate release's edge beside the previous release's edge, per segment",
                       description="Compares two releases' edge over the candidate's window on every figure the "
                                   "gate counts, with the statistics of its cloud comparisons; a comparison is "
                                   "WORSE when the candidate is past the previous release by more than the gate's "
                                   "margin (docs/drill-down.md). Exit status: 0, or 2 for a usage error.")
    p.add_argument("--release", required=True, help="the candidate release, e.g. 4.12")
    p.add_argument("--against", required=True, metavar="RELEASE", help="the previous release, e.g. 4.11")
    p.add_argument("--by", metavar="DIMS", help="also per device cell: comma-separated soc, os_version, "
                                                "mem_class_gb, npu_ready")
    p.add_argument("--all", action="store_true", help="list every comparison, not only the worse ones")
    p.add_argument("--json", action="store_true", help="one JSON object")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    _engine_options(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="write a self-contained HTML page of a release's gate evaluation, with charts")
    p.add_argument("--release", required=True, help="the release, e.g. 4.12")
    p.add_argument("--out", type=Path, help="HTML file to write (default: ./report-<release>.html)")
    p.add_argument("--candidate", type=Path, action="append", default=[], metavar="FILE",
                   help="admit candidate file(s) for the estimate-beside-field table (default: gates/candidates/)")
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("state", help="the rollout state of each segment of a release, its route and why")
    p.add_argument("--release", required=True)
    _db_option(p)
    _config_option(p)
    _as_of_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_state)

    p = sub.add_parser("history", help="the stored gate verdicts of a release over time")
    p.add_argument("--release", required=True, help="the release, e.g. 4.12")
    _db_option(p)
    _format_option(p)
    p.add_argument("--limit", type=int, default=20, help="the newest N evaluations (default 20)")
    p.add_argument("--json", action="store_true", help="a JSON list (same as --format json)")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("runs", help="recent job runs and their outcome")
    _db_option(p)
    p.add_argument("--limit", type=int, default=20, help="how many runs, newest first (default 20)")
    _format_option(p)
    p.set_defaults(func=cmd_runs)
