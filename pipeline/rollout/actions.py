"""People act on a release's rollout, on the record (docs/rollout.md "Actions"): `pipeline rollout
pause|resume|rollback|promote --release R [--segment TASK/TIER/BUCKET] --reason TEXT [--until TIME]`.

Each action is stored once (table `rollout_actions`) with who, when, why, its scope (a segment, or "*": the
whole release) and what the scope's states and routes were before it. Its id is a digest of the release,
scope, action, reason and expiry, so an alerting tool that runs the same rollback twice (`--reason
pagerduty:INC123`) records one action. The gate's own judging never changes; what the actions do:

- rollback: the scope routes to the cloud at once, whatever the gate says, until `--until`, a `resume`, or a
  later `promote` of the same segment. Never held by a pause or a window.
- pause: moves toward the edge (recovery, a suspect segment cleared, a promote) wait until `--until` or a
  `resume`; failures still roll back.
- promote (needs `--until`): the scope routes to the edge, accepting the failures of the gates it failed when
  promoted (or `--gate`), until `--until`, a `resume`, a later `rollback`, or the first look that fails
  another gate. While a pause or a deny window is in force it waits.
- resume: ends the pause, rollback and promote on the same scope ("*" ends every one of the release).

A state that an action shaped says so: its `override` (and `held`) beside the gate's own state.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipeline.rollout import pending
from pipeline.warehouse import sqlfiles

ACTIONS = ("pause", "resume", "rollback", "promote")
WHOLE = "*"  # the scope of an action on every segment of the release
FORCING = ("rollback", "promote")
# CI systems' variables naming the person or bot behind a run, checked in this order
ACTOR_ENV = ("GITHUB_ACTOR", "GITLAB_USER_LOGIN", "BUILDKITE_BUILD_CREATOR", "BUILD_REQUESTEDFOR")


def default_actor() -> str:
    for name in ACTOR_ENV:
        if os.environ.get(name):
            return os.environ[name]
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def action_id(release: str, segment: str, action: str, reason: str, until: datetime | None) -> str:
    key = json.dumps([release, segment, action, reason, until.isoformat() if until else None])
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class Action:
    action_id: str
    release: str
    segment: str
    action: str
    reason: str
    actor: str
    taken_at: datetime
    until: datetime | None = None
    gates: tuple[str, ...] = ()  # promote: the gates whose failures it accepts
    previous: dict[str, Any] = field(default_factory=dict, compare=False)  # per segment: state and route before

    @classmethod
    def of(cls, row: dict[str, Any]) -> Action:
        previous = row.get("previous") or {}
        return cls(row["action_id"], row["release"], row["segment"], row["action"], row["reason"], row["actor"],
                   _time(row["taken_at"]), _time(row.get("until")), tuple(row.get("gates") or ()),
                   json.loads(previous) if isinstance(previous, str) else previous)

    def row(self) -> dict[str, Any]:
        return {"action_id": self.action_id, "release": self.release, "segment": self.segment,
                "action": self.action, "reason": self.reason, "actor": self.actor,
                "taken_at": self.taken_at.isoformat(), "until": self.until.isoformat() if self.until else None,
                "gates": list(self.gates), "previous": self.previous}

    def to_dict(self) -> dict[str, Any]:
        return {**self.row(), "taken_at": _iso(self.taken_at), "until": _iso(self.until) if self.until else None}

    def covers(self, segment: str) -> bool:
        return self.segment in (WHOLE, segment)

    def describe(self) -> str:
        until = f" until {self.until:%Y-%m-%d %H:%M} UTC" if self.until else ""
        verb = {"pause": "paused", "resume": "resumed", "rollback": "rolled back", "promote": "promoted"}[self.action]
        return f"{verb} by {self.actor} at {self.taken_at:%Y-%m-%d %H:%M} UTC{until}: {self.reason}"


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _ended(a: Action, acts: list[Action], segment: str, at: datetime) -> bool:
    """A later action on the segment ended `a` by `at`: a resume of its scope (or of the release), or, for a
    rollback or promote, a later rollback or promote of the segment."""
    for b in acts:
        if b is a or not (a.taken_at <= b.taken_at <= at) or not b.covers(segment):
            continue
        if b.action == "resume" and b.segment in (WHOLE, a.segment):
            return True
        if a.action in FORCING and b.action in FORCING:
            return True
    return False


def in_force(acts: list[Action], kind: tuple[str, ...], segment: str, at: datetime) -> Action | None:
    """The newest action of `kind` on `segment` in force at `at`."""
    live = [a for a in acts if a.action in kind and a.covers(segment) and a.taken_at <= at
            and (a.until is None or at < a.until) and not _ended(a, acts, segment, at)]
    return max(live, key=lambda a: a.taken_at) if live else None


def first_breach(promote: Action, looks: list[Any], at: datetime) -> Any | None:
    """The first look after `promote` (by `at`) that failed a gate the promote did not accept."""
    for look in sorted(looks, key=lambda x: x.at):
        if promote.taken_at <= look.at <= at and set(look.failed_gates) - set(promote.gates):
            return look
    return None


def recorded(con: Any, release: str, db_path: Any = None) -> list[Action]:
    """The release's actions, oldest first: stored, and (given the warehouse's path) those waiting in its
    pending file for the writer that holds it."""
    acts: dict[str, Action] = {}
    if schema_current(con):
        cur = sqlfiles.run(con, "rollout/actions", {"release": release})
        names = [d[0] for d in cur.description]
        acts = {a.action_id: a for a in (Action.of(dict(zip(names, row, strict=True))) for row in cur.fetchall())}
    if db_path is not None:
        for row in pending.peek(db_path, pending.ACTIONS):
            if row["release"] == release:
                acts.setdefault(row["action_id"], Action.of(row))
    return sorted(acts.values(), key=lambda a: (a.taken_at, a.action_id))


def schema_current(con: Any) -> bool:
    """False for a warehouse no writer of this version has opened yet (read-only readers cannot add tables)."""
    return bool(sqlfiles.run(con, "rollout/schema_current").fetchone()[0])
