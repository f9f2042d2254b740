"""gates/admission.yaml, loaded once into frozen, typed objects.

The dataclasses below are the registry of settings: their fields are the only
keys allowed, their types and `meta` bounds are checked on load, and every
error names the file and the dotted key (`gates.peak_memory.max_p95_ratio`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline import package_data
from pipeline.errors import ConfigError

DEFAULT_CONFIG = package_data.folder("gates") / "admission.yaml"
CONFIG_ENV = "PIPELINE_CONFIG"  # a config path for every command, beside PIPELINE_DB
MODES = ("enforce", "observe")


def _f(default: Any, lo: float | None = None, hi: float | None = None, choices: tuple | None = None,
       help: str = "") -> Any:
    return field(default=default, metadata={"lo": lo, "hi": hi, "choices": choices, "help": help})


@dataclass(frozen=True)
class Gate:
    mode: str = _f("enforce", choices=MODES, help="enforce blocks the edge route; observe only reports")


@dataclass(frozen=True)
class RatioCeiling(Gate):
    max_p95_ratio: float = _f(0.40, 0, 1, help="p95 of memory / device RAM")


@dataclass(frozen=True)
class MsCeiling(Gate):
    max_p95_ms: float = _f(10_000.0, 0, 3_600_000, help="p95 in milliseconds")


@dataclass(frozen=True)
class QualityLoss(Gate):
    max_relative_loss: float = _f(0.03, 0, 1, help="(cloud - edge) / cloud adoption")


@dataclass(frozen=True)
class Detectability(Gate):
    min_share: float = _f(0.90, 0, 1, help="failures caught automatically / all failures")


@dataclass(frozen=True)
class FallbackRate(Gate):
    max_rate: float = _f(0.25, 0, 1, help="ceiling on the edge fallback rate")
    max_excess_over_cloud: float = _f(0.05, 0, 1, help="edge rate may exceed cloud's by at most this")


@dataclass(frozen=True)
class Thermal(Gate):
    max_p95_rise_c: float = _f(5.0, 0, 110, help="p95 of temp_end_c - temp_start_c")
    max_throttled_share: float = _f(0.10, 0, 1, help="share of edge requests with OS throttling")


@dataclass(frozen=True)
class DailyEdgeSeconds(Gate):
    mode: str = _f("observe", choices=MODES)
    max_share_over_cap: float = _f(0.05, 0, 1, help="share of device-days over network.daily_edge_seconds_cap")


@dataclass(frozen=True)
class Gates:
    peak_memory: RatioCeiling = RatioCeiling()
    resident_memory: RatioCeiling = RatioCeiling(max_p95_ratio=0.25)
    inference_duration: MsCeiling = MsCeiling()
    cold_start: MsCeiling = MsCeiling(max_p95_ms=500.0)
    quality_loss: QualityLoss = QualityLoss()
    failure_detectability: Detectability = Detectability()
    fallback_rate: FallbackRate = FallbackRate()
    weak_network_latency: Gate = Gate()
    thermal: Thermal = Thermal()
    daily_edge_seconds: DailyEdgeSeconds = DailyEdgeSeconds()

    def names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)]


@dataclass(frozen=True)
class Network:
    weak_rtt_ms: float = _f(300.0, 0, 600_000, help="rtt_ms at or above this is a weak network")
    weak_network_types: tuple[str, ...] = _f(("2g", "3g"), help="network_type values that are weak")
    daily_edge_seconds_cap: float = _f(600.0, 0, 86_400, help="edge inference seconds per device-day")


@dataclass(frozen=True)
class Statistics:
    confidence: float = _f(0.95, 0.5, 0.9999, help="level of intervals; tests decide at alpha = 1 - confidence")


@dataclass(frozen=True)
class Alerts:
    repeat_interval_hours: float = _f(24.0, 0, 24 * 365, help="the same verdict is not re-sent sooner")
    stdout: bool = _f(True, help="print each alert")
    jsonl_path: str = _f("", help="append each alert as a JSON line to this file ('' = off)")
    webhook_url: str = _f("", help="POST each alert as JSON with a `text` field ('' = off)")
    webhook_timeout_s: float = _f(5.0, 0.1, 300)
    webhook_retries: int = _f(3, 0, 20, help="retries of a temporary failure within one delivery run")
    webhook_backoff_s: float = _f(0.5, 0, 60, help="first retry delay; doubles, capped at 30 s")


ROUTES = ("edge", "edge_with_cloud_check", "cloud")


@dataclass(frozen=True)
class Routing:
    cloud_check_catches: tuple[str, ...] = _f(("quality_loss", "failure_detectability", "fallback_rate"),
                                              help="gates whose failures a cloud check of the edge draft catches")
    insufficient_data_route: str = _f("edge_with_cloud_check", choices=ROUTES)


@dataclass(frozen=True)
class CloudCost:
    per_request: float | None = _f(None, 0, 1e6, help="cloud cost of one request")
    per_1k_tokens: float | None = _f(None, 0, 1e6, help="cloud cost per 1,000 prompt + output tokens")
    check_per_request: float | None = _f(None, 0, 1e6, help="cost of one cloud check of an edge draft")


@dataclass(frozen=True)
class UpdateCost:
    package_mb: float | None = _f(None, 0, 1e7, help="size of the model update package, MB")
    installs: float | None = _f(None, 0, 1e12, help="devices that download the release")
    per_gb: float | None = _f(None, 0, 1e6, help="delivery cost per GB (1 GB = 1000 MB)")


@dataclass(frozen=True)
class EngineeringCost:
    hours_per_release: float | None = _f(None, 0, 1e7, help="engineering hours spent on the release's edge model")
    hourly_rate: float | None = _f(None, 0, 1e6, help="cost of one engineering hour")


@dataclass(frozen=True)
class TierPower:
    low: float | None = _f(None, 0, 1000, help="device power while inferring, W")
    mid: float | None = _f(None, 0, 1000)
    high: float | None = _f(None, 0, 1000)
    flagship: float | None = _f(None, 0, 1000)


@dataclass(frozen=True)
class Costs:
    """Unit costs of `pipeline ledger`; every one optional: a term whose inputs are missing is not computed."""
    currency: str = _f("", help="label printed after amounts, e.g. USD")
    cloud: dict[str, CloudCost] = _f(None, help="per task (or `default`): cloud request costs")
    update: UpdateCost = UpdateCost()
    engineering: EngineeringCost = EngineeringCost()
    power_w: TierPower = TierPower()
    estimate_flag_factor: float = _f(1.25, 1, 1000, help="flag a field figure worse than the estimate by this factor")


@dataclass(frozen=True)
class Config:
    version: int = _f(1, 1, 1)
    min_rows_per_segment: int = _f(200, 1, 10_000_000)
    min_measured_rows: int = _f(100, 1, 10_000_000, help="rows with a value a p95 or rate gate needs")
    min_cloud_rows_for_baseline: int = _f(100, 1, 10_000_000)
    window_days: int = _f(14, 1, 3650)
    network: Network = Network()
    gates: Gates = Gates()
    task_overrides: dict[str, Gates] = _f(None, help="per task: gate settings that differ from `gates`")
    statistics: Statistics = Statistics()
    routing: Routing = Routing()
    alerts: Alerts = Alerts()
    costs: Costs = Costs()
    source: str = ""
    digest: str = ""

    def gates_for(self, task: str) -> Gates:
        return (self.task_overrides or {}).get(task, self.gates)


def _type_name(tp: Any) -> str:
    return {float: "a number", int: "a whole number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _check_scalar(value: Any, tp: Any, key: str, meta: dict) -> Any:
    if type(None) in typing.get_args(tp):  # `float | None`: null or absent = not declared
        if value is None:
            return None
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        value = float(value)
    elif tp is int and isinstance(value, int) and not isinstance(value, bool):
        pass
    elif tp in (str, bool) and isinstance(value, tp):
        pass
    else:
        raise ValueError(f"{key} must be {_type_name(tp)}, got {value!r}")
    if meta.get("choices") and value not in meta["choices"]:
        raise ValueError(f"{key} must be one of {', '.join(meta['choices'])}, got {value!r}")
    lo, hi = meta.get("lo"), meta.get("hi")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{key} must be between {lo} and {hi}, got {value!r}")
    return value


def _build(cls: Any, raw: Any, prefix: str, base: Any = None) -> Any:
    """`raw` (a YAML mapping) over `base` (defaults) as an instance of dataclass `cls`."""
    base = base if base is not None else cls()
    if not isinstance(raw, dict):
        raise ValueError(f"{prefix or 'the file'} must be a mapping, got {raw!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.name not in ("source", "digest")}
    values = {}
    for key, value in raw.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in known:
            raise ValueError(f"unknown key {dotted!r}; expected one of: {', '.join(known)}")
        tp, meta = hints[key], known[key].metadata
        current = getattr(base, key)
        if dataclasses.is_dataclass(tp):
            values[key] = _build(tp, value, dotted, current)
        elif typing.get_origin(tp) is dict:  # name -> settings, e.g. costs.cloud.<task>
            if not isinstance(value, dict):
                raise ValueError(f"{dotted} must be a mapping of names to settings, got {value!r}")
            item = typing.get_args(tp)[1]
            values[key] = {str(k): _build(item, v, f"{dotted}.{k}") for k, v in value.items()}
        elif typing.get_origin(tp) is tuple:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{dotted} must be a list of strings, got {value!r}")
            values[key] = tuple(value)
        else:
            values[key] = _check_scalar(value, tp, dotted, meta)
    return dataclasses.replace(base, **values)


def load_config(path: Path | None = None) -> Config:
    path = Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)
    try:
        text = path.read_text()
        raw = yaml.safe_load(text) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    try:
        overrides = raw.pop("task_overrides", None) if isinstance(raw, dict) else None
        config = _build(Config, raw, "")
        per_task: dict[str, Gates] = {}
        if overrides is not None:
            if not isinstance(overrides, dict):
                raise ValueError(f"task_overrides must be a mapping of task to gate settings, got {overrides!r}")
            for task, gates in overrides.items():
                per_task[str(task)] = _build(Gates, gates, f"task_overrides.{task}", config.gates)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return dataclasses.replace(config, task_overrides=per_task, source=str(path), digest=digest)
