"""The one list of gates. Config validation, evaluation, the terminal table, the
HTML report, routing and alerts read their gate names, labels and units here;
adding a gate means adding it here, to its SQL and to its test.

kind:
- "p95_budget": the p95 of a per-request figure against a ceiling
- "rate": a share against a floor or ceiling (and possibly the cloud's share)
- "comparison": the edge against the cloud baseline
- "count_share": a share of device-days
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GateSpec:
    name: str  # the key in gates/admission.yaml and in every output
    label: str  # for people: column headers, alerts, the report
    unit: str  # of the measured figure: "ratio of RAM", "ms", "share", "relative loss", "°C"
    kind: str
    figure: str  # which SQL figure it reads (sql/gate/*.sql column prefix or name)
    column: str  # short column title of the terminal table
    direction: str = "max"  # "max": the figure must stay at or below the threshold; "min": at or above


GATES: tuple[GateSpec, ...] = (
    GateSpec("peak_memory", "peak memory", "ratio of RAM", "p95_budget", "peak", "peak mem"),
    GateSpec("resident_memory", "resident memory", "ratio of RAM", "p95_budget", "resident", "resident mem"),
    GateSpec("inference_duration", "inference duration", "ms", "p95_budget", "total", "p95 ms"),
    GateSpec("cold_start", "cold start", "ms", "p95_budget", "cold", "cold start ms"),
    GateSpec("quality_loss", "quality loss", "relative loss", "comparison", "adopted", "quality loss"),
    GateSpec("failure_detectability", "failure detectability", "share", "rate", "detected", "detected", "min"),
    GateSpec("fallback_rate", "fallback rate", "share", "rate", "fallbacks", "fallback"),
    GateSpec("weak_network_latency", "weak-network latency", "ms", "comparison", "total", "weak-net ms"),
    GateSpec("thermal", "thermal", "°C", "p95_budget", "rise", "rise °C"),
    GateSpec("daily_edge_seconds", "daily edge seconds", "share", "count_share", "device_days", "day cap"),
)

BY_NAME: dict[str, GateSpec] = {g.name: g for g in GATES}
GATE_NAMES: tuple[str, ...] = tuple(g.name for g in GATES)
