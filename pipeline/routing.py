"""The routing table the app consumes: per task x tier x bucket, where requests go.

The layered fallback of the source post-mortem: `edge` where the segment keeps
the edge route; `edge_with_cloud_check` where the only failures are ones a
cloud check of the edge draft catches (routing.cloud_check_catches) or where
there is not enough data yet (routing.insufficient_data_route); else `cloud`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.config import Config
from pipeline.output_schema import SCHEMA_VERSION

ROUTING_TABLE_VERSION = SCHEMA_VERSION  # `version`, the field the app reads, predates schema_version


def route_for(segment: Any, config: Config) -> tuple[str, str]:
    if segment.decision == "keep_edge":
        return "edge", "all gates pass"
    if segment.decision == "insufficient_data":
        return config.routing.insufficient_data_route, "not enough data to judge"
    failed = set(segment.failed_gates)
    if failed <= set(config.routing.cloud_check_catches):
        return "edge_with_cloud_check", "a cloud check catches: " + ", ".join(sorted(failed))
    return "cloud", "failed: " + ", ".join(sorted(failed))


def routing_table(result: Any, config: Config) -> dict[str, Any]:
    routes = []
    for s in result.segments:
        route, why = route_for(s, config)
        if result.verdict == "rollback_to_cloud" and route == "edge":
            route, why = "cloud", "release-wide rollback"
        routes.append({"task": s.task, "device_tier": s.device_tier, "network_bucket": s.network_bucket,
                       "route": route, "reason": why})
    return {"schema_version": SCHEMA_VERSION, "version": ROUTING_TABLE_VERSION, "release": result.release,
            "verdict": result.verdict,
            "derived_at": result.evaluated_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "config_digest": result.config_digest,
            "default_route": "cloud", "routes": routes}


def write_routing_table(result: Any, config: Config, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(routing_table(result, config), indent=2) + "\n")
    tmp.replace(path)  # the app never reads a half-written table
