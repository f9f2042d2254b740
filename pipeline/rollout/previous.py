"""`routing.previous_edge`: an over-the-air grey release keeps the previous edge model on the phone as its
fallback, so a segment that fails on the candidate's edge model can go back to that model instead of the
cloud, where the previous release's edge passed (docs/rollout.md "The previous edge model").

The previous release is the newest release below this one (in version order: 4.9 < 4.10 < 4.11) with a stored
evaluation; a segment is served by its edge model again only where that release's stored rollout state is
`ok` after a passing look (keep_edge), and not while that release is rolled back as a whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pipeline.common.config import Config
from pipeline.common.vocabulary import Verdict
from pipeline.rollout import state as rollout_state
from pipeline.warehouse import sqlfiles


@dataclass(frozen=True)
class PreviousEdge:
    release: str
    model_id: str | None  # the model that served most of its edge rows
    passing: frozenset[str]  # segment keys where its edge passed

    def serves(self, segment: str) -> bool:
        return segment in self.passing


def version_key(release: str) -> tuple:
    """'4.10' after '4.9': numbers compare as numbers, other parts as text."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.\-_+]", release))


def find(con: Any, release: str, config: Config) -> PreviousEdge | None:
    """The previous release's edge, when routing.previous_edge is on and there is one to fall back to."""
    if not config.routing.previous_edge:
        return None
    older = [r for (r,) in sqlfiles.run(con, "rollout/evaluated_releases").fetchall()
             if version_key(r) < version_key(release)]
    if not older:
        return None
    previous = max(older, key=version_key)
    states = rollout_state.stored_states(con, previous)
    passing = frozenset() if rollout_state.release_rolled_back(states) else frozenset(
        k for k, s in states.items()
        if k != rollout_state.RELEASE and s.state == "ok" and s.last_decision == Verdict.KEEP_EDGE)
    model = sqlfiles.run(con, "rollout/edge_model", {"release": previous}).fetchall()
    return PreviousEdge(previous, model[0][0] if model else None, passing)
