"""`pipeline rollout pause|resume|rollback|promote`: people act on a release's rollout, with a reason on record
(pipeline/rollout/actions.py has what each action does). `pipeline routing publish|history|rollback`: the
routing table at the publish targets (pipeline/delivery/publish.py)."""

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
    _show_published,
)
from pipeline.common.errors import UsageError
from pipeline.common.exit_codes import Exit

HELP = {
    "pause": "hold every move toward the edge (recovery, promotion) until --until or a resume; rollbacks still happen",
    "resume": "end the pause, forced rollback and promote on this scope",
    "rollback": "route the scope to the cloud now, whatever the gate says, until --until or a resume (idempotent: "
                "an alerting tool may run it again with the same --reason)",
    "promote": "route the scope to the edge, accepting the gates it fails now (or --gate), until --until; the "
               "first look failing another gate ends it",
}


def cmd_rollout(args: argparse.Namespace) -> int:
    from pipeline.common import clock
    from pipeline.delivery.alerts import on_change
    from pipeline.rollout import actions
    from pipeline.rollout import state as rollout_state
    from pipeline.rollout.history import record_action
    from pipeline.warehouse import db
    from pipeline.warehouse.handle import Warehouse

    config = _config(args)
    reason = " ".join((args.reason or "").split())
    if not reason:
        raise UsageError("--reason is required and must not be blank: it is what people read later")
    now = clock.now(_as_of(args))
    until = clock.parse(args.until, "--until") if args.until else None
    if args.action == "promote" and until is None:
        raise UsageError("promote needs --until TIME: an accepted failure must expire")
    if until is not None and until <= now:
        raise UsageError(f"--until {args.until} is not after now ({now:%Y-%m-%d %H:%M} UTC)")
    segment = args.segment or actions.WHOLE
    path = _db(args)
    with db.reading(path) as con:
        acts = actions.recorded(con, args.release, path)
        states = rollout_state.current(con, args.release, config, now, acts)
    if not states:
        raise UsageError(f"release {args.release!r} has no stored evaluation; judge it first: pipeline gate "
                         f"--release {args.release}")
    if segment != actions.WHOLE and segment not in states:
        known = ", ".join(k for k in sorted(states) if k != rollout_state.RELEASE)
        raise UsageError(f"--segment {segment!r}: release {args.release} has no such segment; segments: {known}")
    _check_gates(args.gate)
    scope = [k for k in states if k == segment or segment == actions.WHOLE]
    routes = rollout_state.routes(states, config)
    previous = {k: {"state": states[k].state, "route": routes.get(k, ("", ""))[0] or None,
                    "override": states[k].override["action"] if states[k].override else None} for k in sorted(scope)}
    accepted = tuple(args.gate) if args.gate else tuple(sorted({g for k in scope for g in states[k].failed_gates}))
    action = actions.Action(actions.action_id(args.release, segment, args.action, reason, until), args.release,
                           segment, args.action, reason, args.actor or actions.default_actor(), now, until,
                           accepted if args.action == "promote" else (), previous)
    known = {a.action_id: a for a in acts}
    if action.action_id in known:
        outcome, action = "already", known[action.action_id]
        after = states
    else:
        recorded = record_action(Warehouse(path, "rollout"), action, config, on_change=on_change)
        outcome, after = recorded.outcome, recorded.states
        for warning in recorded.warnings:
            print(f"pipeline rollout: warning: {warning}", file=sys.stderr)
        if outcome == "pending":  # as readers see it now: the stored states and the waiting actions
            with db.reading(path) as con:
                after = rollout_state.current(con, args.release, config, now, actions.recorded(con, args.release, path))
    _show(args, action, outcome, after, scope, config)
    if outcome == "stored" and not args.no_alerts:
        from pipeline.cli.gate import _deliver_alerts

        _deliver_alerts(args, config, Warehouse(path, "rollout"))
    if args.routing_out:
        _write_routing(args, config, after)
    if outcome == "stored" and config.publish.targets:
        return _publish_stored(args, config, path, now)
    return Exit.OK


def _publish_stored(args: argparse.Namespace, config: Any, path: Path, now: Any) -> int:
    """A person's action reaches the phones at once: the release's stored decision to every publish target."""
    from pipeline.delivery import publish
    from pipeline.warehouse import db
    from pipeline.warehouse.handle import Warehouse

    with db.reading(path) as con:
        decision = publish.stored_decision(con, args.release, config, now)
    done = publish.publish(Warehouse(path, "rollout"), config, [decision]) if decision else []
    return Exit.ERROR if _show_published(done, args.json) else Exit.OK


def _check_gates(gates: list[str]) -> None:
    from pipeline.common.registry import GATE_NAMES

    for g in gates:
        if g not in GATE_NAMES:
            raise UsageError(f"--gate {g!r} is not a gate; gates: {', '.join(GATE_NAMES)}")


def _show(args: argparse.Namespace, action: Any, outcome: str, states: dict[str, Any], scope: list[str],
          config: Any) -> None:
    from pipeline.common.output_schema import SCHEMA_VERSION
    from pipeline.rollout import state as rollout_state

    rows = {k: rollout_state.standing(k, states, config) for k in sorted(scope) if k in states}
    if args.json:
        _emit_json({"schema_version": SCHEMA_VERSION, "outcome": outcome, "action": action.to_dict(),
                    "status": rollout_state.status(states).kind, "segments": rows})
        return
    said = {"stored": "stored", "already": "already on record (the same action, reason and expiry): nothing new",
            "pending": "waits in the pending file for the writer that holds the warehouse; in force for readers now"}
    where = "the whole release" if action.segment == "*" else action.segment
    print(f"release {action.release}, {where}: {action.describe()} ({said[outcome]}; id {action.action_id})")
    for k, r in rows.items():
        if k == rollout_state.RELEASE:
            continue
        print(f"  {k}: {r['route']} ({r['state']}) - {r['route_reason']}")
    print(f"rollout of release {action.release} now: {rollout_state.describe(states, config)}")


def _write_routing(args: argparse.Namespace, config: Any, states: dict[str, Any]) -> None:
    """The routing table with the action in it, from the gate's evaluation now (as `gate --routing-out`)."""
    from pipeline.cli.common import _evaluate, _warehouse
    from pipeline.rollout.routing import routing_table, write_routing_table

    with _warehouse(args, config) as con:
        result = _evaluate(args, config, con)
    write_routing_table(routing_table(result.to_dict(), config, states), args.routing_out)
    print(f"wrote {args.routing_out}")


def add_commands(sub: Any) -> None:
    p = sub.add_parser("rollout", help="pause, resume, roll back or promote a release's rollout, with a reason "
                                       "on record",
                       description="People's actions on a rollout, stored with who, when, why, the scope and the "
                                   "state it moved from; shown by state, history, explain, the report and the "
                                   "alerts beside the gate's own view (docs/rollout.md \"Actions\"). The gate's "
                                   "verdict and exit code never change. A stored action is published to the "
                                   "config's publish.targets at once (docs/publishing.md). Exit status: 0 "
                                   "recorded (or already on record), 2 usage error or the routes not published.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in HELP.items():
        a = actions.add_parser(name, help=text, description=text)
        a.add_argument("--release", required=True, help="the release, e.g. 4.12")
        a.add_argument("--segment", metavar="TASK/TIER/BUCKET", help="one segment (default: the whole release)")
        a.add_argument("--reason", required=True, help="why, e.g. pagerduty:INC123 or 'holiday freeze'")
        if name != "resume":
            a.add_argument("--until", metavar="TIME", help="when it ends by itself, ISO time in UTC"
                                                           + (" (required)" if name == "promote" else ""))
        a.add_argument("--actor", help="who acts (default: the CI's actor variable, else the login name)")
        if name == "promote":
            a.add_argument("--gate", action="append", default=[], metavar="GATE",
                           help="accept this gate's failures (repeatable; default: the gates failing now)")
        a.add_argument("--routing-out", type=Path, help="write the routing table with this action to this file")
        a.add_argument("--no-alerts", action="store_true", help="store the alert, send nothing now")
        a.add_argument("--json", action="store_true", help="the action and the scope's states as one JSON object")
        _db_option(a)
        _config_option(a)
        _as_of_option(a)
        a.set_defaults(func=cmd_rollout, until=None, gate=[])
    add_routing_command(sub)


def cmd_routing(args: argparse.Namespace) -> int:
    from pipeline.common import clock
    from pipeline.common.tables import rows_as
    from pipeline.delivery import publish
    from pipeline.delivery.alerts import deliver
    from pipeline.rollout import actions
    from pipeline.warehouse import db
    from pipeline.warehouse.handle import Warehouse

    config = _config(args)
    wh = Warehouse(_db(args), "routing")
    if args.step == "history":
        columns, rows = publish.history(wh, config, args.release, args.target)
        print(rows_as("json" if args.json else "table", columns, rows))
        return Exit.OK
    if args.step == "publish":
        with db.reading(wh.path) as con:
            decision = publish.stored_decision(con, args.release, config, clock.now(_as_of(args)))
        if decision is None:
            raise UsageError(f"release {args.release!r} has no stored evaluation; judge it first: pipeline gate "
                             f"--release {args.release}")
        done = publish.publish(wh, config, [decision], target=args.target, replace=args.replace,
                               force=args.replace is not None, reason=" ".join((args.reason or "").split()),
                               actor=args.actor or actions.default_actor())
    else:
        reason = " ".join((args.reason or "").split())
        if not reason:
            raise UsageError("--reason is required and must not be blank: it is what people read later")
        done = publish.rollback(wh, config, args.release, args.to, reason, args.actor or actions.default_actor(),
                                args.target)
    if args.json:
        _emit_json({"release": args.release, "published": [p.to_dict() for p in done]})
        failed = any(p.outcome == "failed" for p in done)
    else:
        failed = _show_published(done)
    if failed:
        deliver(wh, config, out=sys.stderr if args.json else None)
        return Exit.ERROR
    return Exit.OK


def add_routing_command(sub: Any) -> None:
    p = sub.add_parser("routing", help="the routing table at the publish targets: publish it, list its versions, "
                                       "go back to an earlier one",
                       description="Where the apps read the routing table (publish.targets; docs/publishing.md). "
                                   "The nightly job and `gate --routing-out` publish each decision; these "
                                   "commands publish the stored decision again, list the versions, or put back "
                                   "an earlier version with a reason on record. Exit status: 0 done, 2 not "
                                   "published (another writer's version, the store unreachable) or usage error.")
    steps = p.add_subparsers(dest="step", required=True, metavar="STEP")
    texts = {"publish": "publish the release's stored decision where it is not yet (idempotent)",
             "history": "every version of the release's routing object, with who published it and why",
             "rollback": "re-publish an earlier version's bytes (--to VERSION) with a reason on record"}
    for name, text in texts.items():
        a = steps.add_parser(name, help=text, description=text)
        a.add_argument("--release", required=True, help="the release, e.g. 4.12")
        a.add_argument("--target", metavar="NAME", help="one publish target (default: every one)")
        if name == "rollback":
            a.add_argument("--to", required=True, metavar="VERSION", help="the version to put back "
                                                                          "(`pipeline routing history` lists them)")
        if name == "publish":
            a.add_argument("--replace", metavar="VERSION", help="write over this version, which another writer "
                                                                "made (the conflict error names it)")
        if name != "history":
            a.add_argument("--reason", required=name == "rollback", help="why, e.g. pagerduty:INC123")
            a.add_argument("--actor", help="who acts (default: the CI's actor variable, else the login name)")
        a.add_argument("--json", action="store_true", help="one JSON object (history: a JSON list)")
        _db_option(a)
        _config_option(a)
        if name == "publish":
            _as_of_option(a)
        a.set_defaults(func=cmd_routing, replace=None, reason="", actor=None, as_of=None)
