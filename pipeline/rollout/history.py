"""Stored gate evaluations (table `evaluations`) and people's actions (`rollout_actions`); `pipeline history`
reads them back.

`pipeline gate` reads through a read-only connection so it answers while the
nightly job writes. Storing its evaluation needs the writer lock: in one
transaction the evaluation is inserted, its looks advance the rollout state of
its segments (pipeline/rollout/state.py) and a change of state puts its alert in the
outbox (pipeline/delivery/alerts.py). When another writer holds the lock, the evaluation
waits in `<db>.pending-evaluations.jsonl` (pipeline/rollout/pending.py) and the next
evaluation stored folds it in first, oldest first. `gate --dry-run` stores nothing.

Each stored evaluation records its trigger: ci, nightly or manual. An action (pipeline/rollout/actions.py)
is stored the same way: at once when the writer lock is free, else through `<db>.pending-actions.jsonl`,
which readers read too, so it is in force for them at once.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.common.config import Config
from pipeline.common.errors import DatabaseBusy
from pipeline.common.vocabulary import Verdict
from pipeline.rollout import actions, pending
from pipeline.rollout import state as rollout_state
from pipeline.warehouse import db, handle, sqlfiles
from pipeline.warehouse.handle import Warehouse

TRIGGERS = ("ci", "nightly", "manual")
INTRADAY = "intraday"  # the trigger of an intra-day look (pipeline look): stored in intraday_looks, not evaluations


def default_trigger() -> str:
    """ci when the CI variable is set (GitHub Actions, GitLab CI and most others set it), else manual."""
    return "ci" if os.environ.get("CI", "").lower() not in ("", "0", "false") else "manual"


def evaluation_row(result: Any, trigger: str) -> dict[str, Any]:
    judged = result.judged
    return {
        "evaluation_uid": uuid.uuid4().hex, "trigger": trigger,
        "release": result.release, "as_of": result.as_of.isoformat(), "evaluated_at": result.evaluated_at.isoformat(),
        "verdict": result.verdict, "segments_judged": len(judged),
        "segments_rolled_back": sum(s.decision == Verdict.ROLLBACK_TO_CLOUD for s in judged),
        "failed_gates": sorted({g for s in judged for g in s.failed_gates}
                               | {g for g, c in result.release_wide.items() if c.blocks}),
        "config_digest": result.config_digest, "code_version": __version__,
        "result": json.dumps(result.to_dict()),
    }


@dataclass
class Recorded:
    stored: bool  # False: it waits in the pending file for the next writer
    warnings: list[str] = field(default_factory=list)
    states: dict[str, rollout_state.SegmentState] = field(default_factory=dict)  # of the release, after storing
    evaluation_uid: str = ""
    stored_at: datetime | None = None  # wall clock, UTC: when the decision took effect
    moved: list[str] = field(default_factory=list)  # the segments whose rollout state it moved

    def __bool__(self) -> bool:
        return self.stored


# what recording a move of the rollout states raises, in the same transaction: delivery.alerts.on_change
# (passed in by the caller: delivery sits above rollout in the flow)
OnChange = Callable[[Any, str, "rollout_state.RolloutStatus", dict[str, Any], dict[str, Any], Config, datetime], None]


def _store(con: Any, row: dict[str, Any], config: Config,
           on_change: OnChange) -> dict[str, rollout_state.SegmentState] | None:
    """One evaluation, its looks and its alert; None when it was stored already."""
    if "action_id" in row:
        return _store_action(con, actions.Action.of(row), config, on_change)
    evaluated_at = datetime.fromisoformat(row["evaluated_at"])
    result = json.loads(row["result"])
    release = row["release"]
    acts = actions.recorded(con, release)
    before = rollout_state.current(con, release, config, evaluated_at, acts)  # before the row is in
    sql, extra = "gate/insert_evaluation", {}
    if row["trigger"] == INTRADAY:
        fails = rollout_state.intraday_fails_of(result)
        sql, extra = "rollout/insert_intraday_look", {
            "look_uid": row["evaluation_uid"], "failed_segments": list(fails),
            "failed_gates": [list(look.failed_gates) for look in fails.values()]}
    inserted = sqlfiles.run(con, sql, {
        **{k: v for k, v in row.items() if k in sqlfiles.param_names(sqlfiles.sql_file(sql))}, **extra,
        "as_of": datetime.fromisoformat(row["as_of"]), "evaluated_at": evaluated_at,
        "stored_at": db.utcnow()}).fetchone()
    if inserted is None:
        return None
    states = rollout_state.apply(con, row, result, config, evaluated_at, acts)
    if row["trigger"] == INTRADAY:
        moved = [k for k, s in states.items() if k not in before or s.state != before[k].state]
        sqlfiles.run(con, "rollout/intraday_moved", {"look_uid": row["evaluation_uid"], "moved": moved})
    on_change(con, release, rollout_state.status(before), states, result, config, evaluated_at)
    return states


def _store_action(con: Any, action: actions.Action, config: Config,
                  on_change: OnChange) -> dict[str, rollout_state.SegmentState] | None:
    """One action, the states it shapes and its alert; None when it was stored already."""
    release, at = action.release, action.taken_at
    acts = actions.recorded(con, release)
    before = rollout_state.status(rollout_state.current(con, release, config, at, acts))
    inserted = sqlfiles.run(con, "rollout/insert_action", {
        **action.row(), "taken_at": at, "until": action.until, "previous": json.dumps(action.previous),
        "stored_at": db.utcnow()}).fetchone()
    if inserted is None:
        return None
    states = rollout_state.current(con, release, config, at, [*acts, action])
    rollout_state.store(con, release, states, at)
    last = sqlfiles.run(con, "rollout/last_result", {"release": release}).fetchone()
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    result = json.loads(last[0]) if last else {"as_of": stamp, "evaluated_at": stamp, "verdict": "not evaluated",
                                               "release_wide": {}, "segments": []}
    on_change(con, release, before, states, result, config, at)
    return states


@dataclass
class ActionRecorded:
    outcome: str  # stored | already (the same action was stored before) | pending (waits for the writer)
    states: dict[str, rollout_state.SegmentState] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def record_action(warehouse: Warehouse | Path, action: actions.Action, config: Config, *,
                  on_change: OnChange) -> ActionRecorded:
    """Store `action` with the actions and evaluations waiting in the pending files, in time order, never
    waiting for another writer's run: busy, it waits in `<db>.pending-actions.jsonl`."""
    wh = handle.handle_of(warehouse, "rollout")
    try:
        with wh.writing(lock_wait=0) as con:
            states, warnings = _fold(con, wh.path, config, on_change, action.row())
        return ActionRecorded("stored" if states is not None else "already", states or {}, warnings)
    except DatabaseBusy:
        pending.append(wh.path, action.row(), pending.ACTIONS)
        return ActionRecorded("pending")


def _fold(con: Any, db_path: Path, config: Config, on_change: OnChange,
          row: dict[str, Any]) -> tuple[dict[str, rollout_state.SegmentState] | None, list[str]]:
    """`row` (an evaluation or an action) stored after the waiting ones of both files, in time order, in one
    transaction; returns its release's states after it (None when it was stored before) and the warnings
    about lines of the pending files set aside."""
    taken = [pending.take(db_path, queue) for queue in (pending.ACTIONS, pending.EVALUATIONS)]
    rows = sorted([r for t in taken for r in t.rows] + [row], key=_when)
    states = None
    con.begin()
    for r in rows:
        stored = _store(con, r, config, on_change)
        if r is row:
            states = stored
    con.commit()
    for t in taken:
        pending.done(t)
    return states, [w for t in taken for w in t.warnings]


def _when(row: dict[str, Any]) -> str:
    return datetime.fromisoformat(row.get("evaluated_at") or row["taken_at"]).isoformat()


def record_evaluation(warehouse: Warehouse | Path, result: Any, config: Config, trigger: str = "manual", *,
                      on_change: OnChange) -> Recorded:
    """Store `result` (with the evaluations waiting in the pending file, oldest first); `on_change` raises
    the alert of each move of the rollout states (delivery.alerts.on_change)."""
    row = evaluation_row(result, trigger)
    wh = handle.handle_of(warehouse, "gate")
    try:
        # never waits for another writer (the nightly): busy, the evaluation waits in the pending file
        with wh.writing(lock_wait=0) as con:
            states, warnings = _fold(con, wh.path, config, on_change, row)
            if trigger == INTRADAY:
                stored_at, moved = sqlfiles.run(con, "rollout/intraday_stored_at",
                                                {"look_uid": row["evaluation_uid"]}).fetchone()
            else:
                stored_at = sqlfiles.run(con, "gate/stored_at",
                                         {"evaluation_uid": row["evaluation_uid"]}).fetchone()[0]
                moved = []
        return Recorded(True, warnings, states or {}, row["evaluation_uid"], stored_at, list(moved))
    except DatabaseBusy:
        pending.append(wh.path, row)
        return Recorded(False)


def history(con: Any, release: str, limit: int = 20,
            acts: list[actions.Action] | None = None) -> tuple[list[str], list[tuple]]:
    """The newest `limit` evaluations; times are UTC and say so. Each row's last column, `overrides`, names
    the people's actions in force when it was made (`acts`): its verdict is the gate's own, beside them."""
    acts = acts or []
    cur = sqlfiles.run(con, "gate/history", {"release": release, "limit": limit})
    columns = [d[0] for d in cur.description] + ["overrides"]
    when = columns.index("evaluated_at")
    rows = []
    for r in cur.fetchall():
        live = [a for a in acts
                if a.action != "resume" and actions.in_force(acts, (a.action,), a.segment, r[when]) is a]
        rows.append((*(v.replace(tzinfo=UTC) if isinstance(v, datetime) else v for v in r),
                     "; ".join(f"{a.action} {a.segment}: {a.describe()}" for a in live) or None))
    return columns, rows


def intraday_history(con: Any, release: str, limit: int = 20) -> tuple[list[str], list[tuple]]:
    """The newest `limit` intra-day looks: what each saw failing and which rollout states it moved."""
    cur = sqlfiles.run(con, "rollout/intraday_history", {"release": release, "limit": limit})
    columns = [d[0] for d in cur.description]
    return columns, [tuple(v.replace(tzinfo=UTC) if isinstance(v, datetime) else
                           ", ".join(v) if isinstance(v, list) else v for v in r) for r in cur.fetchall()]


def action_rows(acts: list[actions.Action]) -> tuple[list[str], list[tuple]]:
    """The actions, newest first, as `pipeline history` lists them under the evaluations."""
    columns = ["taken_at", "action", "segment", "actor", "reason", "until", "previous", "action_id"]
    return columns, [(a.taken_at.replace(tzinfo=UTC), a.action, a.segment, a.actor, a.reason,
                      a.until.replace(tzinfo=UTC) if a.until else None,
                      ", ".join(f"{k} {v['state']}/{v['route']}" for k, v in sorted(a.previous.items())),
                      a.action_id) for a in reversed(acts)]
