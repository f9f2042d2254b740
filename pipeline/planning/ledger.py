"""`pipeline ledger`: what the edge route of a release served, saved and cost, from stored telemetry.

Counts come from sql/ledger/segments.sql over the gate's window (window_days up to --as-of), per task x tier x
network bucket. Unit costs come from the config's `costs` section (gates/admission.yaml); every one is optional,
and a term whose inputs are missing is not computed: it says which keys it needs. Per segment and for the
release:

    edge requests          on-device rows (edge, edge_with_cloud_check)
    cloud avoided          edge rows not re-served by the cloud (auto_fallback false), outside the offline bucket
                           (offline, no cloud could have served them); cost = n x per_request + tokens / 1000 x
                           per_1k_tokens of costs.cloud.<task> (else costs.cloud.default)
    fallbacks              edge rows with auto_fallback, re-served by the cloud; their cost likewise. The cloud
                           pays them with or without the edge, so the net does not subtract them again.
    cloud checks           edge_with_cloud_check rows x check_per_request
    edge seconds, energy   sum of total_ms (wall time) / 1000; Wh = seconds x costs.power_w.<tier> / 3600
    heat and lag exposure  throttled share, share over 10 s, abandonment edge beside cloud
    lost users             release only, with a device-level hold-back (assignment.unit device): the drop in the
                           share of devices returning (the retention guardrail's figure, sql/gate/retention.sql;
                           cloud - edge, 0 when the edge returns as often) x the edge arm's devices in the window;
                           cost = lost users x costs.lost_user_value (the post-mortem's last term: uninstalls
                           and lost retention caused by heat and lag)
    net                    avoided cost - check cost (segment); for the release also - update bandwidth
                           (package_mb / 1000 x installs x per_gb) - engineering (hours_per_release x
                           hourly_rate) - the retention cost where measured. Positive: the edge saved money.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from pipeline.common import clock
from pipeline.common.config import CloudCost, Config
from pipeline.common.errors import UnknownRelease
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.common.vocabulary import BUCKETS, TIERS, Side
from pipeline.gate import source
from pipeline.gate.window import Window, gate_window
from pipeline.planning.estimates import EstimateTable, estimate_tables
from pipeline.warehouse import sqlfiles

SEGMENTS_SQL = "ledger/segments"
COUNT_COLUMNS = ("edge_requests", "cloud_checks", "offline_served", "fallbacks", "fallback_tokens", "avoided",
                 "avoided_tokens", "edge_seconds", "throttled_known", "throttled", "over_10s", "edge_abandoned",
                 "cloud_requests", "cloud_abandoned")


@dataclass(frozen=True)
class Figure:
    """One ledger figure: its value (None when an input is missing), unit, and what it is computed from."""

    value: float | None
    unit: str
    basis: str
    missing: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"value": _json_number(self.value), "unit": self.unit, "basis": self.basis}
        if self.missing:
            d["missing"] = list(self.missing)
        return d


def _json_number(v: float | None) -> float | None:
    return None if v is None else round(float(v), 6) if isinstance(v, float) else v


def fmt_amount(v: float | None, unit: str = "") -> str:
    """Counts whole, shares in %, seconds whole, money and Wh with 2 decimals (3 significant digits below 1)."""
    if v is None:
        return "–"
    if unit == "share":
        return f"{100 * v:.1f} %"
    if unit in ("requests", "tokens"):
        return f"{int(v):,}"
    if unit == "devices":
        return f"{v:,.1f}"
    if unit == "s":
        return f"{v:,.0f}"
    return f"{v:.3g}" if 0 < abs(v) < 1 else f"{v:,.2f}"


def _share(n: int, d: int, what: str) -> Figure:
    if d == 0:
        return Figure(None, "share", f"no {what}")
    return Figure(n / d, "share", f"{n:,} of {d:,} {what}")


@dataclass(frozen=True)
class SegmentLedger:
    task: str
    device_tier: str
    network_bucket: str
    counts: dict[str, Any]
    figures: dict[str, Figure]

    @property
    def key(self) -> str:
        return f"{self.task}/{self.device_tier}/{self.network_bucket}"

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "device_tier": self.device_tier, "network_bucket": self.network_bucket,
                "figures": {k: f.to_dict() for k, f in self.figures.items()}}


@dataclass(frozen=True)
class Ledger:
    release: str
    as_of: datetime
    window_start: datetime
    window_end: datetime  # whole days, as the gate's (pipeline/gate/window.py)
    config_source: str
    config_digest: str
    currency: str
    segments: tuple[SegmentLedger, ...]
    totals: dict[str, Figure]
    estimates: tuple[EstimateTable, ...] = ()  # one per task with a candidate file

    @property
    def no_costs_declared(self) -> bool:
        """Not one money term could be computed: the config declares no costs (the shipped one), so the ledger
        says so once instead of naming every missing key on every line."""
        return all(self.totals[name].value is None for name in COST_LINES if name in self.totals)

    @property
    def missing_costs(self) -> list[str]:
        seen: dict[str, None] = {}
        for f in [*self.totals.values(), *(f for s in self.segments for f in s.figures.values())]:
            seen.update(dict.fromkeys(f.missing))
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "release": self.release,
            "as_of": self.as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "window": {"start": self.window_start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "end": self.window_end.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "config": {"path": self.config_source, "digest": self.config_digest},
            "currency": self.currency,
            "release_totals": {k: f.to_dict() for k, f in self.totals.items()},
            "missing_costs": self.missing_costs,
            "segments": [s.to_dict() for s in self.segments],
            "estimates": [t.to_dict() for t in self.estimates],
        }

    def __str__(self) -> str:
        return render_text(self)


# ---------------------------------------------------------------- arithmetic


def _cloud_entry(config: Config, task: str) -> tuple[CloudCost | None, str]:
    cloud = config.costs.cloud or {}
    if task in cloud:
        return cloud[task], f"costs.cloud.{task}"
    if "default" in cloud:
        return cloud["default"], "costs.cloud.default"
    return None, f"costs.cloud.{task} (or costs.cloud.default)"


def cloud_cost(entry: CloudCost | None, key: str, requests: int, tokens: int, currency: str,
               what: str) -> Figure:
    """n x per_request + tokens / 1000 x per_1k_tokens (either part may be undeclared, not both)."""
    if entry is None or (entry.per_request is None and entry.per_1k_tokens is None):
        return Figure(None, currency, f"{what}: no cloud cost declared",
                      (f"{key}: per_request or per_1k_tokens",))
    value, parts = 0.0, []
    if entry.per_request is not None:
        value += requests * entry.per_request
        parts.append(f"{requests:,} requests x {entry.per_request:g} ({key}.per_request)")
    if entry.per_1k_tokens is not None:
        value += tokens / 1000 * entry.per_1k_tokens
        parts.append(f"{tokens:,} prompt + output tokens / 1000 x {entry.per_1k_tokens:g} ({key}.per_1k_tokens)")
    return Figure(value, currency, f"{what}: " + " + ".join(parts))


def _money_sum(figures: list[Figure], currency: str, basis: str) -> Figure:
    missing = tuple(dict.fromkeys(m for f in figures for m in f.missing))
    if missing:
        return Figure(None, currency, basis, missing)
    return Figure(sum(f.value or 0.0 for f in figures), currency, basis)


def _exposure(c: dict[str, Any]) -> dict[str, Figure]:
    return {
        "throttled_share": _share(c["throttled"], c["throttled_known"], "edge rows reporting throttled"),
        "over_10s_share": _share(c["over_10s"], c["edge_requests"], "edge rows with total_ms > 10,000"),
        "edge_abandonment": _share(c["edge_abandoned"], c["edge_requests"], "edge rows with outcome abandoned"),
        "cloud_abandonment": _share(c["cloud_abandoned"], c["cloud_requests"],
                                    "cloud rows (the hold-back baseline) with outcome abandoned"),
    }


def _segment_figures(task: str, tier: str, c: dict[str, Any], config: Config) -> dict[str, Figure]:
    cur = config.costs.currency
    entry, key = _cloud_entry(config, task)
    f: dict[str, Figure] = {
        "edge_requests": Figure(c["edge_requests"], "requests", "on-device rows (edge, edge_with_cloud_check)"),
        "cloud_requests_avoided": Figure(c["avoided"], "requests",
                                         "edge rows not re-served by the cloud (auto_fallback false), "
                                         "outside the offline bucket"),
        "cloud_cost_avoided": cloud_cost(entry, key, c["avoided"], c["avoided_tokens"], cur,
                                         "the avoided requests"),
        "fallbacks_reserved": Figure(c["fallbacks"], "requests", "edge rows with auto_fallback (re-served by the "
                                                                 "cloud)"),
        "fallback_cost": cloud_cost(entry, key, c["fallbacks"], c["fallback_tokens"], cur,
                                    "the re-served fallbacks (paid with or without the edge)"),
        "cloud_checks": Figure(c["cloud_checks"], "requests", "edge_with_cloud_check rows (one cloud check each)"),
        "offline_served": Figure(c["offline_served"], "requests",
                                 "edge rows in the offline bucket (no cloud could have served them)"),
        "edge_seconds": Figure(float(c["edge_seconds"]), "s", "sum of total_ms / 1000 of the edge rows (wall time)"),
    }
    if c["cloud_checks"] == 0:
        f["cloud_check_cost"] = Figure(0.0, cur, "no cloud checks")
    elif entry is None or entry.check_per_request is None:
        f["cloud_check_cost"] = Figure(None, cur, "the cloud checks: no check cost declared",
                                       (f"{key}: check_per_request",))
    else:
        f["cloud_check_cost"] = Figure(c["cloud_checks"] * entry.check_per_request, cur,
                                       f"{c['cloud_checks']:,} checks x {entry.check_per_request:g} "
                                       f"({key}.check_per_request)")
    power = getattr(config.costs.power_w, tier, None)
    if power is None:
        f["energy_wh"] = Figure(None, "Wh", "edge seconds x declared power: none declared for this tier",
                                (f"costs.power_w.{tier}",))
    else:
        f["energy_wh"] = Figure(c["edge_seconds"] * power / 3600, "Wh",
                                f"{c['edge_seconds']:,.0f} s x {power:g} W (costs.power_w.{tier}) / 3600")
    f.update(_exposure(c))
    f["net"] = _net([f["cloud_cost_avoided"], f["cloud_check_cost"]], cur,
                    "cloud cost avoided - cloud check cost")
    return f


def _net(terms: list[Figure], currency: str, basis: str) -> Figure:
    """terms[0] minus the others; None (with every missing key) when any term is unknown."""
    missing = tuple(dict.fromkeys(m for t in terms for m in t.missing))
    if missing:
        return Figure(None, currency, f"{basis}: not computed, costs missing", missing)
    value = (terms[0].value or 0.0) - sum(t.value or 0.0 for t in terms[1:])
    return Figure(value, currency, basis)


def _release_figures(segments: list[SegmentLedger], config: Config,
                     returning: dict[str, Figure]) -> dict[str, Figure]:
    cur = config.costs.currency
    total = {k: sum(s.counts[k] for s in segments) for k in COUNT_COLUMNS}
    n = len(segments)
    f: dict[str, Figure] = {}
    for name in ("edge_requests", "cloud_requests_avoided", "fallbacks_reserved", "cloud_checks", "offline_served"):
        col = {"cloud_requests_avoided": "avoided", "fallbacks_reserved": "fallbacks"}.get(name, name)
        f[name] = Figure(total[col], "requests", f"sum over the {n} segments of: {_basis(name)}")
    for name in ("cloud_cost_avoided", "fallback_cost", "cloud_check_cost"):
        f[name] = _money_sum([s.figures[name] for s in segments], cur, f"sum over the {n} segments of: "
                                                                      f"{_basis(name)}")
    f["edge_seconds"] = Figure(float(total["edge_seconds"]), "s", f"sum over the {n} segments of: "
                                                                  f"{_basis('edge_seconds')}")
    f["energy_wh"] = _money_sum([s.figures["energy_wh"] for s in segments if s.counts["edge_requests"]], "Wh",
                                f"sum over the {n} segments of: {_basis('energy_wh')}")
    f.update(_exposure(total))
    up = config.costs.update
    missing = tuple(f"costs.update.{k}" for k in ("package_mb", "installs", "per_gb") if getattr(up, k) is None)
    if missing:
        f["update_bandwidth_cost"] = Figure(None, cur, "model update package x installs x cost per GB", missing)
    else:
        gb = up.package_mb / 1000 * up.installs
        f["update_bandwidth_cost"] = Figure(gb * up.per_gb, cur, f"{up.package_mb:g} MB / 1000 x {up.installs:,.0f} "
                                                                f"installs = {gb:,.0f} GB x {up.per_gb:g} per GB")
    eng = config.costs.engineering
    missing = tuple(f"costs.engineering.{k}" for k in ("hours_per_release", "hourly_rate") if getattr(eng, k) is None)
    if missing:
        f["engineering_cost"] = Figure(None, cur, "engineering hours per release x hourly rate", missing)
    else:
        f["engineering_cost"] = Figure(eng.hours_per_release * eng.hourly_rate, cur,
                                       f"{eng.hours_per_release:g} h x {eng.hourly_rate:g} per hour")
    f.update(returning)
    measured = f["lost_users"].value is not None
    f["net"] = _net([f["cloud_cost_avoided"], f["cloud_check_cost"], f["update_bandwidth_cost"],
                     f["engineering_cost"]] + [f["retention_cost"]] * measured, cur,
                    "cloud cost avoided - cloud check cost - update bandwidth - engineering"
                    + (" - retention cost" if measured else " (retention not measured)") + " (> 0: the edge saved)")
    return f


def _lost_users(con: Any, window: Window, params: dict[str, Any], config: Config) -> dict[str, Figure]:
    """lost_users and retention_cost of the release: the retention guardrail's drop x the edge arm's devices."""
    from pipeline.gate.evaluate import returning_devices

    cur = config.costs.currency
    if config.assignment.unit != "device":  # before any roll-up of the window's events: nothing to read
        basis = "not measured: needs a device-level hold-back (assignment.unit: device)"
        return {"lost_users": Figure(None, "devices", basis), "retention_cost": Figure(None, cur, basis)}
    with source.reading(con, config, window, params["release"]):  # the rollup the gate reads, or its stand-in
        returning = returning_devices(con, params, config) or {}
    edge, cloud = returning.get((Side.EDGE, ())), returning.get((Side.CLOUD, ()))
    if not edge or not cloud or not edge["devices"] or not cloud["devices"]:
        basis = "not measured: no devices of one arm first seen early enough to come back in the window"
        return {"lost_users": Figure(None, "devices", basis), "retention_cost": Figure(None, cur, basis)}
    pe, pc = edge["returned"] / edge["devices"], cloud["returned"] / cloud["devices"]
    lost = max(0.0, pc - pe) * edge["arm_devices"]
    basis = (f"(cloud {pc:.1%} - edge {pe:.1%} of devices returning after "
             f"{config.gates.retention.horizon_days:g} days, 0 if below) x "
             f"{edge['arm_devices']:,} edge devices")
    out = {"lost_users": Figure(lost, "devices", basis)}
    value = config.costs.lost_user_value
    out["retention_cost"] = (Figure(None, cur, "lost users x value per lost user", ("costs.lost_user_value",))
                             if value is None else Figure(lost * value, cur, f"{lost:,.1f} lost users x {value:g}"))
    return out


def _basis(name: str) -> str:
    return COLUMN_BASES.get(name) or RELEASE_BASES[name]


def _order(s: SegmentLedger) -> tuple:
    def rank(v: str, known: tuple[str, ...]) -> tuple[int, str]:
        return (known.index(v), "") if v in known else (len(known), v)
    return s.task, rank(s.device_tier, TIERS), rank(s.network_bucket, BUCKETS)


def compute_ledger(con: duckdb.DuckDBPyConnection, release: str, config: Config, as_of: datetime | None = None,
                   candidates: list[Path] | None = None) -> Ledger:
    """The ledger of `release` over the gate's window up to `as_of` (default now), with the estimate-beside-
    measurement table of every task that has a candidate file (`candidates`, else gates/candidates/<task>.yaml).
    The connection's derived fields must follow `config` (aggregate.use_settings)."""
    from pipeline.gate.evaluate import releases

    as_of = clock.now(as_of)
    known = releases(con)
    if release not in known:
        if not known:
            raise UnknownRelease("no telemetry in this database yet; ingest some first (pipeline ingest PATH)")
        raise UnknownRelease(f"no release {release!r} in the database; releases present: {', '.join(known)}")
    window = gate_window(as_of, config)  # the gate's whole days
    window_start, params = window.start, window.params(release)
    cur = sqlfiles.run(con, SEGMENTS_SQL, params)
    cols = [d[0] for d in cur.description]
    segments = []
    for row in cur.fetchall():
        r = dict(zip(cols, row, strict=True))
        counts = {k: r[k] for k in COUNT_COLUMNS}
        segments.append(SegmentLedger(r["task"], r["device_tier"], r["network_bucket"], counts,
                                      _segment_figures(r["task"], r["device_tier"], counts, config)))
    segments.sort(key=_order)
    tasks = sorted({s.task for s in segments})
    tables = estimate_tables(con, params, config, tasks, candidates)
    return Ledger(release, as_of, window_start, window.end, config.source, config.digest, config.costs.currency,
                  tuple(segments), _release_figures(segments, config, _lost_users(con, window, params, config)),
                  tuple(tables))


# ---------------------------------------------------------------- text

# (figure, column title) of the per-segment table
COLUMNS = (("edge_requests", "edge req"), ("cloud_requests_avoided", "avoided"), ("cloud_cost_avoided", "avoided $"),
           ("fallbacks_reserved", "fallbacks"), ("fallback_cost", "fallback $"), ("edge_seconds", "edge s"),
           ("energy_wh", "Wh"), ("throttled_share", "throttled"), ("over_10s_share", ">10 s"),
           ("edge_abandonment", "abandon"), ("cloud_abandonment", "cloud abandon"), ("net", "net $"))
COST_LINES = ("cloud_cost_avoided", "fallback_cost", "cloud_check_cost", "energy_wh", "update_bandwidth_cost",
              "engineering_cost", "net")  # the terms that need declared costs
RELEASE_LINES = ("edge_requests", "cloud_requests_avoided", "cloud_cost_avoided", "fallbacks_reserved",
                 "fallback_cost", "cloud_checks", "cloud_check_cost", "offline_served", "edge_seconds", "energy_wh",
                 "throttled_share", "over_10s_share", "edge_abandonment", "cloud_abandonment",
                 "update_bandwidth_cost", "engineering_cost", "lost_users", "retention_cost", "net")


def line_label(name: str) -> str:
    return {"energy_wh": "energy", "over_10s_share": "over 10 s share",
            "fallbacks_reserved": "fallbacks re-served"}.get(name, name.replace("_", " "))


def value_text(f: Figure, currency: str) -> str:
    if f.value is None:
        return "–"
    text = fmt_amount(f.value, f.unit)
    if f.unit in ("s", "Wh"):
        return f"{text} {f.unit}"
    if f.unit == currency and currency:
        return f"{text} {currency}"
    return text


NO_COSTS_HINT = "money terms show '–'; copy gates/costs.example.yaml's costs into the config to see them"


def render_text(ledger: Ledger) -> str:
    from pipeline.common.tables import rows_as

    quiet = ledger.no_costs_declared
    amounts = (f"no costs declared: {NO_COSTS_HINT}" if quiet
               else f"amounts in {ledger.currency or '(no currency set)'}")
    out = [f"ledger {ledger.release}: window {ledger.window_start:%Y-%m-%d %H:%M} .. "
           f"{ledger.window_end:%Y-%m-%d %H:%M} "
           f"UTC, costs from {ledger.config_source} (digest {ledger.config_digest}); {amounts}", ""]
    out.append("Release")
    width = max(len(line_label(n)) for n in RELEASE_LINES)
    for name in RELEASE_LINES:
        f = ledger.totals[name]
        missing = ", ".join(f.missing) if name != "net" else "the costs listed below"
        out.append(f"  {line_label(name):<{width}}  {value_text(f, ledger.currency):>16}  {f.basis}"
                   + (f" [missing: {missing}]" if f.missing and not quiet else ""))
    if not quiet:
        missing = ledger.missing_costs
        out += ["", "Costs missing (terms not computed): " + "; ".join(missing) if missing
                else "Every cost term has its inputs."]
    if not ledger.segments:
        out += ["", "The release has no rows in the evaluation window: nothing to account for."]
    out += ["", "Per segment (task/tier/bucket); '–' = its inputs are missing"]
    columns = ["segment"] + [title for _, title in COLUMNS]
    rows = [tuple([s.key] + [_cell(s.figures[name]) for name, _ in COLUMNS]) for s in ledger.segments]
    out.append(rows_as("table", columns, rows))
    out += ["", "Columns:"]
    out += [f"  {title:<13} {COLUMN_BASES[name]}" for name, title in COLUMNS]
    for table in ledger.estimates:
        out += ["", str(table)]
    if not ledger.estimates:
        out += ["", "Estimate beside measurement: no candidate file for the release's tasks "
                    "(gates/candidates/<task>.yaml or --candidate FILE)"]
    return "\n".join(out)


COLUMN_BASES = {
    "edge_requests": "on-device rows (edge, edge_with_cloud_check)",
    "cloud_requests_avoided": "edge rows not re-served by the cloud (auto_fallback false), outside the offline bucket",
    "cloud_cost_avoided": "avoided x per_request + their tokens / 1000 x per_1k_tokens (costs.cloud.<task>)",
    "fallbacks_reserved": "edge rows with auto_fallback (re-served by the cloud)",
    "fallback_cost": "fallbacks x per_request + their tokens / 1000 x per_1k_tokens (costs.cloud.<task>)",
    "edge_seconds": "sum of total_ms / 1000 of the edge rows (wall time)",
    "energy_wh": "edge seconds x costs.power_w.<tier> / 3600",
    "throttled_share": "edge rows reporting throttled / edge rows reporting throttling at all",
    "over_10s_share": "edge rows with total_ms > 10,000 / edge rows",
    "edge_abandonment": "edge rows with outcome abandoned / edge rows",
    "cloud_abandonment": "the same for the segment's cloud rows (the hold-back baseline)",
    "net": "cloud cost avoided - cloud check cost (edge_with_cloud_check rows x check_per_request)",
}
RELEASE_BASES = {
    "cloud_checks": "edge_with_cloud_check rows (one cloud check each)",
    "cloud_check_cost": "edge_with_cloud_check rows x check_per_request (costs.cloud.<task>)",
    "offline_served": "edge rows in the offline bucket (no cloud could have served them)",
}


def _cell(f: Figure) -> Any:
    if f.value is None:
        return "–"
    if f.unit == "share":
        return f"{100 * f.value:.1f} %"
    if f.unit == "requests":
        return int(f.value)
    return float(round(f.value, 2)) if f.unit != "Wh" else float(round(f.value, 3))
