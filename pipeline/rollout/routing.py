"""The routing table the app consumes: per task x tier x bucket, where requests go.

Derived from the rollout state of each segment (pipeline/rollout/state.py has the
rules): `edge` where the segment is ok, `cloud` where it is rolled back (every
segment when the release is rolled back as a whole), `edge_with_cloud_check`
where it is suspect or where a cloud check of the edge draft catches every gate
it failed (routing.cloud_check_catches), and routing.insufficient_data_route
where there is not enough data yet. With routing.previous_edge, a segment that
would go to the cloud goes to `previous_edge` (the previous release's edge model,
kept on the phone) where that model passed (pipeline/rollout/previous.py).

With routing.dimensions (e.g. [soc]) each segment's entry also lists its cells
(pipeline/gate/cells.py), each with its own route from this evaluation: a cell that
fails on its own goes to the cloud (or the cloud check, as above); a cell that passes
on its own every gate keeps the edge when its segment is rolled back only for gates
judged per cell; any other cell follows its segment. A device whose values match no
listed cell follows its segment's route.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.common.config import Config
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.common.vocabulary import PREVIOUS_EDGE, Route
from pipeline.rollout import state as rollout_state

ROUTING_TABLE_VERSION = SCHEMA_VERSION  # `version`, the field the app reads, predates schema_version


def routing_table(result: dict[str, Any], config: Config, states: dict[str, Any] | None = None,
                  previous: Any = None) -> dict[str, Any]:
    """`result`: a gate result as its JSON says it (GateResult.to_dict(), or as stored). `states`: the rollout
    states after this evaluation (rollout_state.preview / apply); without them the release is treated as judged
    for the first time. `previous`: routing.previous_edge's fallback (rollout/previous.py find()); a segment
    routed to it names its model_id."""
    states = states if states is not None else rollout_state.fresh(result, config)
    cells = result.get("cells") or {}
    routes = []
    for s in result["segments"]:
        key = f"{s['task']}/{s['device_tier']}/{s['network_bucket']}"
        route, why, cause = rollout_state.route_for(key, states, config, previous)
        entry = {"task": s["task"], "device_tier": s["device_tier"], "network_bucket": s["network_bucket"],
                 "route": route, "state": states[key].state if key in states else "ok", "reason": why,
                 "cause": cause}
        if route == PREVIOUS_EDGE:
            entry["model_id"], entry["previous_release"] = previous.model_id, previous.release
        override = states[key].override if key in states else None
        if rollout_state.forced(states.get(key)):  # a person's action sets this route, not the gate
            entry["override"] = {k: override[k] for k in ("action", "actor", "reason", "taken_at", "until",
                                                          "action_id")}
        if key in cells.get("segments", {}):
            entry["cells"] = cell_routes(route, states.get(key), cells["dimensions"], cells["segments"][key],
                                         states, config)
        routes.append(entry)
    return {"schema_version": SCHEMA_VERSION, "version": ROUTING_TABLE_VERSION, "release": result["release"],
            "verdict": result["verdict"], "rollout": rollout_state.status(states).kind,
            "derived_at": result["evaluated_at"], "config_digest": result["config"]["digest"],
            "default_route": Route.CLOUD, "routes": routes}


def cell_routes(route: str, state: Any, dimensions: list[str], verdicts: list[dict[str, Any]],
                states: dict[str, Any], config: Config) -> list[dict[str, Any]]:
    """The cells of one segment with their routes (module docstring)."""
    from pipeline.gate.cells import FAIL, PASS
    from pipeline.gate.drill import READS

    whole = rollout_state.release_rolled_back(states)
    failed = set(state.failed_gates) if state is not None else set()
    out = []
    for v in verdicts:
        cell_route, why = route, f"as its segment: {v['reason']}"
        if whole:
            why = "as its segment: the release is rolled back as a whole"
        elif v["status"] == FAIL:
            checked = set(v["failed_gates"]) <= set(config.routing.cloud_check_catches)
            cell_route = Route.EDGE_WITH_CLOUD_CHECK.value if checked else Route.CLOUD.value
            why = v["reason"]
        elif v["status"] == PASS and (route == Route.EDGE or (failed and failed <= set(READS))):
            cell_route, why = Route.EDGE.value, v["reason"]
        out.append({**{d: v[d] for d in dimensions}, "devices": v["devices"], "route": cell_route, "reason": why})
    return out


def write_routing_table(table: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(table, indent=2) + "\n")
    tmp.replace(path)  # the app never reads a half-written table
