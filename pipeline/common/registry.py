"""The one list of gates. Config validation, evaluation, the terminal table, the
HTML report, routing and alerts read their gate names, labels and units here;
adding a gate means adding it here, to its SQL, its measurement in its family's module of gate/ (measure.py) and
its test.

kind:
- "p95_budget": the p95 of a per-request figure against a ceiling
- "rate": a share against a floor or ceiling (and possibly the cloud's share)
- "comparison": the edge against the cloud baseline
- "count_share": a share of device-days (a device's days, summed per device)

Every gate is judged by hypothesis tests (docs/how-the-gate-decides.md); `tests`
names them: "" is the gate's main test, others are named parts (a family each).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class GateName(StrEnum):
    """The gates' names: the keys of gates/admission.yaml and of every output."""

    PEAK_MEMORY = "peak_memory"
    RESIDENT_MEMORY = "resident_memory"
    KILL_RATE = "kill_rate"
    INFERENCE_DURATION = "inference_duration"
    COLD_START = "cold_start"
    QUALITY_LOSS = "quality_loss"
    RETENTION = "retention"
    FAILURE_DETECTABILITY = "failure_detectability"
    FALLBACK_RATE = "fallback_rate"
    WEAK_NETWORK_LATENCY = "weak_network_latency"
    THERMAL = "thermal"
    DAILY_EDGE_SECONDS = "daily_edge_seconds"


@dataclass(frozen=True)
class GateSpec:
    name: GateName
    label: str  # for people: column headers, alerts, the report
    unit: str  # of the measured figure: "ratio of RAM", "ms", "share", "relative loss", "°C"
    kind: str
    figure: str  # which SQL figure it reads (sql/gate/*.sql column prefix or name)
    column: str  # short column title of the terminal table
    direction: str = "max"  # "max": the figure must stay at or below the threshold; "min": at or above
    threshold_key: str = ""  # the config key of its threshold ("" = the cloud baseline is the threshold)
    cloud_check_catches: bool = False  # a cloud check of the edge draft catches its failures (routing default)
    compares_cloud: bool = False  # compares the edge with the cloud hold-back (believed only when the split holds)
    tests: tuple[str, ...] = ("",)  # its hypothesis tests: one Holm family each, with an equal share of its alpha


GATES: tuple[GateSpec, ...] = (
    GateSpec(GateName.PEAK_MEMORY, "peak memory", "ratio of RAM", "p95_budget", "peak", "peak mem",
             threshold_key="max_p95_ratio"),
    GateSpec(GateName.RESIDENT_MEMORY, "resident memory", "ratio of RAM", "p95_budget", "resident", "resident mem",
             threshold_key="max_p95_ratio"),
    GateSpec(GateName.KILL_RATE, "kill rate", "share", "count_share", "kill_days", "killed",
             threshold_key="max_share"),
    GateSpec(GateName.INFERENCE_DURATION, "inference duration", "ms", "p95_budget", "total", "p95 ms",
             threshold_key="max_p95_ms"),
    GateSpec(GateName.COLD_START, "cold start", "ms", "p95_budget", "cold", "cold start ms",
             threshold_key="max_p95_ms"),
    GateSpec(GateName.QUALITY_LOSS, "quality loss", "relative loss", "comparison", "adopted", "quality loss",
             threshold_key="max_relative_loss", cloud_check_catches=True, compares_cloud=True),
    GateSpec(GateName.RETENTION, "retention", "share", "comparison", "returned", "return drop",
             threshold_key="max_drop", compares_cloud=True),
    GateSpec(GateName.FAILURE_DETECTABILITY, "failure detectability", "share", "rate", "detected", "detected", "min",
             threshold_key="min_share", cloud_check_catches=True),
    GateSpec(GateName.FALLBACK_RATE, "fallback rate", "share", "rate", "fallbacks", "fallback",
             threshold_key="max_rate", cloud_check_catches=True, compares_cloud=True, tests=("ceiling", "excess")),
    GateSpec(GateName.WEAK_NETWORK_LATENCY, "weak-network latency", "ms", "comparison", "total", "weak-net ms",
             compares_cloud=True),
    GateSpec(GateName.THERMAL, "thermal", "°C", "p95_budget", "rise", "rise °C", threshold_key="max_p95_rise_c",
             tests=("", "throttled_share")),
    GateSpec(GateName.DAILY_EDGE_SECONDS, "daily edge seconds", "share", "count_share", "device_days", "day cap",
             threshold_key="max_share_over_cap"),
)

# statistics.estimand: how the rate and comparison gates weigh a device
# (docs/how-the-gate-decides.md "What a rate means")
ESTIMANDS: tuple[str, ...] = ("per_device", "capped_requests", "requests")

BY_NAME: dict[str, GateSpec] = {g.name: g for g in GATES}
GATE_NAMES: tuple[str, ...] = tuple(g.name for g in GATES)
CLOUD_CHECK_CATCHES: tuple[str, ...] = tuple(g.name for g in GATES if g.cloud_check_catches)
CLOUD_COMPARISONS: tuple[str, ...] = tuple(g.name for g in GATES if g.compares_cloud)


def label(name: str) -> str:
    """The people's name of a gate ('release' and unknown names pass through)."""
    spec = BY_NAME.get(name)
    return spec.label if spec else name
