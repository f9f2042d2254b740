"""Stored gate evaluations (table `evaluations`); `pipeline history` reads them back.

`pipeline gate` reads through a read-only connection so it answers while the
nightly job writes. Storing its evaluation needs the writer lock: in one
transaction the evaluation is inserted, its looks advance the rollout state of
its segments (pipeline/rollout/state.py) and a change of state puts its alert in the
outbox (pipeline/delivery/alerts.py). When another writer holds the lock, the evaluation
waits in `<db>.pending-evaluations.jsonl` (pipeline/rollout/pending.py) and the next
evaluation stored folds it in first, oldest first. `gate --dry-run` stores nothing.

Each stored evaluation records its trigger: ci, nightly or manual.
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
from pipeline.rollout import pending
from pipeline.rollout import state as rollout
from pipeline.warehouse import handle, sqlfiles
from pipeline.warehouse.handle import Warehouse

TRIGGERS = ("ci", "nightly", "manual")


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
    states: dict[str, rollout.SegmentState] = field(default_factory=dict)  # of the release, after storing

    def __bool__(self) -> bool:
        return self.stored


# what recording a move of the rollout states raises, in the same transaction: delivery.alerts.on_change
# (passed in by the caller: delivery sits above rollout in the flow)
OnChange = Callable[[Any, str, "rollout.Status", dict[str, Any], dict[str, Any], Config, datetime], None]


def _store(con: Any, row: dict[str, Any], config: Config,
           on_change: OnChange) -> dict[str, rollout.SegmentState] | None:
    """One evaluation, its looks and its alert; None when it was stored already."""
    evaluated_at = datetime.fromisoformat(row["evaluated_at"])
    inserted = sqlfiles.run(con, "gate/insert_evaluation", {
        **{k: v for k, v in row.items() if k in sqlfiles.param_names(sqlfiles.sql_file("gate/insert_evaluation"))},
        "as_of": datetime.fromisoformat(row["as_of"]), "evaluated_at": evaluated_at}).fetchone()
    if inserted is None:
        return None
    result = json.loads(row["result"])
    release = row["release"]
    before = rollout.status(rollout.stored_states(con, release))
    states = rollout.apply(con, row, result, config, evaluated_at)
    on_change(con, release, before, states, result, config, evaluated_at)
    return states


def record_evaluation(warehouse: Warehouse | Path, result: Any, config: Config, trigger: str = "manual", *,
                      on_change: OnChange) -> Recorded:
    """Store `result` (with the evaluations waiting in the pending file, oldest first); `on_change` raises
    the alert of each move of the rollout states (delivery.alerts.on_change)."""
    row = evaluation_row(result, trigger)
    wh = handle.handle_of(warehouse, "gate")
    try:
        # never waits for another writer (the nightly): busy, the evaluation waits in the pending file
        with wh.writing(lock_wait=0) as con:
            taken = pending.take(wh.path)
            rows = sorted(taken.rows + [row], key=lambda r: r["evaluated_at"])
            states: dict[str, rollout.SegmentState] = {}
            con.begin()
            for r in rows:
                stored = _store(con, r, config, on_change)
                if r is row and stored is not None:
                    states = stored
            con.commit()
            pending.done(taken)
        return Recorded(True, taken.warnings, states)
    except DatabaseBusy:
        pending.append(wh.path, row)
        return Recorded(False)


def history(con: Any, release: str, limit: int = 20) -> tuple[list[str], list[tuple]]:
    """The newest `limit` evaluations; times are UTC and say so."""
    cur = sqlfiles.run(con, "gate/history", {"release": release, "limit": limit})
    columns = [d[0] for d in cur.description]
    rows = [tuple(v.replace(tzinfo=UTC) if isinstance(v, datetime) else v for v in r) for r in cur.fetchall()]
    return columns, rows
