"""The routing table as OpenFeature reads it (docs/publishing.md "OpenFeature"): a flagd flag definition and the
answers of OFREP, the OpenFeature Remote Evaluation Protocol.

One string flag per release, `edge-route-<release>`; its variants are the routes (common/vocabulary.py ROUTES) and
the evaluation context carries what the routing table is keyed by: `task`, `device_tier`, `network_bucket`, and
the device dimensions of `routing.dimensions` (soc, os_version, ...). route_of() is the one evaluation: a
segment's cell whose values all match the context, else the segment, else the table's default_route.
flagd_flag() writes the same rules as JsonLogic, in the same order (a segment's cells that leave its route
first, then the segment, then the default), so a flagd provider, OFREP (pipeline/delivery/serve.py) and the
routing document answer alike for every context (tests/test_serve.py checks a grid of them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.common.errors import UsageError
from pipeline.common.vocabulary import ROUTES

FLAG_PREFIX = "edge-route-"
SEGMENT_KEYS = ("task", "device_tier", "network_bucket")
_NOT_DIMENSIONS = {"devices", "route", "reason"}
FLAGD_SCHEMA = "https://flagd.dev/schema/v0/flags.json"
TARGETING_MATCH, DEFAULT = "TARGETING_MATCH", "DEFAULT"  # OpenFeature's resolution reasons


def flag_key(release: str) -> str:
    return f"{FLAG_PREFIX}{release}"


def release_of(key: str) -> str | None:
    return key[len(FLAG_PREFIX):] if key.startswith(FLAG_PREFIX) and len(key) > len(FLAG_PREFIX) else None


def _dimensions(cell: dict[str, Any]) -> list[str]:
    return [k for k in cell if k not in _NOT_DIMENSIONS]


def route_of(table: dict[str, Any], context: dict[str, Any]) -> tuple[str, str]:
    """The route `table` gives a device described by `context`, and OpenFeature's reason for it."""
    for entry in table["routes"]:
        if all(str(context.get(k)) == str(entry[k]) for k in SEGMENT_KEYS):
            for cell in entry.get("cells", []):
                if all(str(context.get(d)) == str(cell[d]) for d in _dimensions(cell)):
                    return cell["route"], TARGETING_MATCH
            return entry["route"], TARGETING_MATCH
    return table["default_route"], DEFAULT


def flagd_flag(table: dict[str, Any], sha256: str, evaluation_uid: str) -> dict[str, Any]:
    """The flag of one release's routing table, in flagd's flag-definition format."""
    rules: list[Any] = []
    for entry in table["routes"]:
        segment = [{"==": [{"var": k}, entry[k]]} for k in SEGMENT_KEYS]
        for cell in entry.get("cells", []):
            if cell["route"] != entry["route"]:
                rules += [{"and": segment + [{"==": [{"var": d}, cell[d]]} for d in _dimensions(cell)]},
                          cell["route"]]
        rules += [{"and": segment}, entry["route"]]
    return {"state": "ENABLED", "variants": {r: r for r in ROUTES}, "defaultVariant": table["default_route"],
            "targeting": {"if": [*rules, table["default_route"]]} if rules else {},
            "metadata": {"release": table["release"], "verdict": table["verdict"], "content_sha256": sha256,
                         "evaluation_uid": evaluation_uid, "derived_at": table["derived_at"]}}


def write_flagd(path: Path, table: dict[str, Any], sha256: str, evaluation_uid: str) -> None:
    """Set the release's flag in the flagd file at `path` (the other releases' flags stay), atomically: a
    provider watching the file never reads half of it."""
    flags: dict[str, Any] = {}
    if path.exists():
        try:
            flags = json.loads(path.read_text())["flags"]
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{path}: not a flagd flag file this pipeline wrote (no \"flags\" object); move it "
                             "away or name another path") from None
    flags[flag_key(table["release"])] = flagd_flag(table, sha256, evaluation_uid)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"$schema": FLAGD_SCHEMA, "flags": dict(sorted(flags.items()))}, indent=1) + "\n")
    tmp.replace(path)


def ofrep_answer(key: str, table: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """OFREP's successful evaluation of flag `key` (the release's table) for `context`."""
    route, reason = route_of(table, context)
    return {"key": key, "value": route, "variant": route, "reason": reason, "metadata": {}}
