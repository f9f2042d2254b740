"""The routing table the app consumes: per task x tier x bucket, where requests go.

Derived from the rollout state of each segment (pipeline/rollout/state.py has the
rules): `edge` where the segment is ok, `cloud` where it is rolled back (every
segment when the release is rolled back as a whole), `edge_with_cloud_check`
where it is suspect or where a cloud check of the edge draft catches every gate
it failed (routing.cloud_check_catches), and routing.insufficient_data_route
where there is not enough data yet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.common.config import Config
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.rollout import state as rollout

ROUTING_TABLE_VERSION = SCHEMA_VERSION  # `version`, the field the app reads, predates schema_version


def routing_table(result: Any, config: Config, states: dict[str, Any] | None = None) -> dict[str, Any]:
    """`states`: the rollout states after this evaluation (rollout.preview / apply); without them the
    release is treated as judged for the first time."""
    states = states if states is not None else rollout.fresh(result.to_dict(), config)
    routes = []
    for s in result.segments:
        route, why = rollout.route_for(s.key, states, config)
        routes.append({"task": s.task, "device_tier": s.device_tier, "network_bucket": s.network_bucket,
                       "route": route, "state": states[s.key].state if s.key in states else "ok", "reason": why})
    return {"schema_version": SCHEMA_VERSION, "version": ROUTING_TABLE_VERSION, "release": result.release,
            "verdict": result.verdict, "rollout": rollout.status(states).kind,
            "derived_at": result.evaluated_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "config_digest": result.config_digest,
            "default_route": "cloud", "routes": routes}


def write_routing_table(result: Any, config: Config, path: Path, states: dict[str, Any] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(routing_table(result, config, states), indent=2) + "\n")
    tmp.replace(path)  # the app never reads a half-written table
