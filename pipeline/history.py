"""Every gate evaluation is stored (table `evaluations`); `pipeline history` reads it back.

`pipeline gate` reads through a read-only connection so it answers while the
nightly job writes. Storing its evaluation (and its alert, see alerts.py) needs
the writer lock: when another writer holds it, both wait in
`<db>.pending-evaluations.jsonl` and the next evaluation stored folds them in first.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline import __version__, db, sqlfiles
from pipeline.alerts import build_alert, enqueue
from pipeline.config import Config
from pipeline.errors import DatabaseBusy


def _row(result: Any) -> dict[str, Any]:
    judged = [s for s in result.segments if s.decision != "insufficient_data"]
    return {
        "release": result.release, "as_of": result.as_of.isoformat(), "evaluated_at": result.evaluated_at.isoformat(),
        "verdict": result.verdict, "segments_judged": len(judged),
        "segments_rolled_back": sum(s.decision == "rollback_to_cloud" for s in judged),
        "failed_gates": sorted({g for s in judged for g in s.failed_gates}
                               | {g for g, c in result.release_wide.items() if c.blocks}),
        "config_digest": result.config_digest, "code_version": __version__,
        "result": json.dumps(result.to_dict()),
    }


def _pending_path(db_path: Path) -> Path:
    return Path(f"{db_path}.pending-evaluations.jsonl")


def record_evaluation(db_path: Path, result: Any, config: Config) -> bool:
    """Store `result` and put its alert in the outbox, in one transaction;
    False when both had to wait in the pending file."""
    row = {**_row(result), "alert": build_alert(result)}
    try:
        with db.writer_lock(db_path, "gate"), db.writing(db_path) as con:
            pending = _pending_path(db_path)
            rows = [json.loads(line) for line in pending.read_text().splitlines()] if pending.exists() else []
            con.begin()
            for r in rows + [row]:
                evaluated_at = datetime.fromisoformat(r["evaluated_at"])
                sqlfiles.run(con, "gate/insert_evaluation", {
                    **{k: v for k, v in r.items() if k != "alert"},
                    "as_of": datetime.fromisoformat(r["as_of"]), "evaluated_at": evaluated_at})
                enqueue(con, r["alert"], config, evaluated_at)
            con.commit()
            pending.unlink(missing_ok=True)
        return True
    except DatabaseBusy:
        with _pending_path(db_path).open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        return False


def history(con: Any, release: str) -> tuple[list[str], list[tuple]]:
    cur = sqlfiles.run(con, "gate/history", {"release": release})
    return [d[0] for d in cur.description], cur.fetchall()
