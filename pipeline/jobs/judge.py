"""Judging releases: the one path `pipeline gate`, the nightly job and a library caller take.

For each release: the gate's result (pipeline/gate/evaluate.py) over the whole days before `as_of`, read while
the reading lasts; then, with the reading closed, the result stored with the moves of its rollout states and
the alerts they raise (pipeline/rollout/history.py; the alerts wait in the outbox, and the caller delivers them:
the gate at once, the nightly job after its last step); then the routing table, with the previous release's
edge model where the app keeps one (pipeline/rollout/routing.py, previous.py), written to its file and, for a
stored decision, published to the config's publish targets (pipeline/delivery/publish.py). A dry run stores
nothing and shows the rollout states that storing would make.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.common.config import Config
from pipeline.delivery.alerts import on_change
from pipeline.delivery.publish import Decision, Published, publish
from pipeline.gate.evaluate import evaluate_gate
from pipeline.gate.result import GateResult
from pipeline.rollout import state as rollout_state
from pipeline.rollout.history import Recorded, record_evaluation
from pipeline.rollout.routing import routing_table, write_routing_table
from pipeline.views.story import ReleaseStory, story
from pipeline.warehouse import db
from pipeline.warehouse.handle import Warehouse


@dataclass
class Judgement:
    result: GateResult
    states: dict[str, Any]  # the release's rollout states after storing (or what storing would make)
    recorded: Recorded | None  # None: a dry run; falsy: another writer was busy, the evaluation waits
    routing: Path | None  # the routing table written, if one was asked for
    story: ReleaseStory  # every segment's route, why and own evidence, as every output tells it
    published: list[Published]  # the routing table at each publish target (none asked for: empty)


def judge(wh: Warehouse, reading: Callable[[], AbstractContextManager[Any]],
          releases: Sequence[str] | Callable[[Any], Sequence[str]], config: Config,
          *, as_of: datetime | None, now: datetime | None = None, trigger: str, holdback_share: float | None = None,
          from_events: bool = False, dry_run: bool = False, served: bool = False,
          routing_out: Callable[[str], Path | None] | None = None, publishing: bool = False,
          intraday: bool = False) -> list[Judgement]:
    """Evaluate `releases` (or those `releases(source)` finds) on the source `reading()` opens (a DuckDB
    connection with the config's settings, or a Spark engine), then store each result, then write the routing
    tables `routing_out(release)` names and (`publishing`) publish each stored one. `served`: each result says
    which snapshot it read (pipeline gate). `intraday`: an intra-day look (the day so far judged too; stored as
    a look, published only when it moved a rollout state: docs/intraday.md)."""
    with reading() as source:
        chosen = releases(source) if callable(releases) else releases
        results = [evaluate_gate(source, release, config, as_of=as_of, now=now, holdback_share=holdback_share,
                                 from_events=from_events, intraday=intraday) for release in chosen]
    if served:
        for result in results:
            result.snapshot = db.served_dict(wh.path)
    judged = []
    for result in results:
        recorded = None if dry_run else record_evaluation(wh, result, config, trigger=trigger, on_change=on_change)
        states = recorded.states if recorded else preview(wh, result, config)
        previous = _previous(wh, result, config)
        as_dict = result.to_dict()
        table = routing_table(as_dict, config, states, previous)
        target = routing_out(result.release) if routing_out else None
        if target is not None:
            write_routing_table(table, target)
        published = []
        if publishing and recorded and (recorded.moved or not intraday):
            published = publish(wh, config, [Decision(table, recorded.evaluation_uid, recorded.stored_at)])
        judged.append(Judgement(result, states, recorded, target, story(as_dict, states, config, previous),
                                published))
    return judged


def preview(wh: Warehouse, result: GateResult, config: Config) -> dict[str, Any]:
    """What storing `result` would make of its release's rollout states, with the actions on record and waiting."""
    from pipeline.rollout.actions import recorded

    with db.reading(wh.path) as con:
        return rollout_state.preview(con, result.to_dict(), config, recorded(con, result.release, wh.path))


def _previous(wh: Warehouse, result: GateResult, config: Config) -> Any:
    """routing.previous_edge's model for the release (rollout/previous.py), or None."""
    if not config.routing.previous_edge:
        return None  # without opening the file
    from pipeline.rollout.previous import find

    with db.reading(wh.path) as con:
        return find(con, result.release, config)
