"""`pipeline report`: one self-contained HTML page per release, for the person deciding a rollback.

The gate's table says what; the page shows why. Everything a decision rests on comes from the
GateResult the gate computed (verdict, the segment x gate table with measured values, thresholds,
intervals and baselines, the window, the rows per segment, the memory p95s); the pictures of
distributions and daily rates come from small SQL files in sql/report/ over the same window:

    latency       edge vs cloud p50/p95/p99 of total_ms per task and network bucket (events_enriched)
    temperature   a deterministic sample of edge rows: temperature rise against total_ms
    daily_rates   adoption and fallback rate by day, edge vs cloud (rollup_daily)
    quarantined   rows of the release that ingestion quarantined

Charts are Vega-Lite specs built with Altair and drawn in the browser as SVG by vega-embed. The
Vega, Vega-Lite and vega-embed JavaScript is inlined from vl-convert-python's bundle, so the file
opens offline: no script, style or font is fetched from anywhere.

Altair and vl-convert are imported here only, inside the functions that need them, so `pipeline
gate` and `pipeline --help` never load them.

Why one module: one self-contained page whose queries, chart specs, HTML and inlined assets change
together; its figures and routes come from common/units.py and views/story.py.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from pipeline.common.config import Config
from pipeline.common.registry import BY_NAME, GATE_NAMES, GateName
from pipeline.common.registry import label as gate_label
from pipeline.common.units import figure_of, interval_text, limit_text, p_text, percent
from pipeline.common.vocabulary import BUCKETS, TIERS, Side, Status, Tier, Verdict
from pipeline.gate.drill import NULL
from pipeline.gate.result import GateCheck, GateResult, Segment
from pipeline.views.render import intraday_latency, intraday_text, last_published, published_text
from pipeline.views.story import ROUTE_WORDS, ReleaseStory, group_heading, read_story
from pipeline.warehouse import sqlfiles

TEMPERATURE_POINTS = 3000  # edge rows drawn in the temperature scatter
OVER_10S_MS = 10_000  # the contract's over_10s line (sql/ddl/derived.sql)
CHARTS = ("matrix", "latency", "memory", "temperature", "daily", "rows")  # each drawn into <div id="chart-NAME">
VERDICT_COLOURS = {Verdict.KEEP_EDGE: "#1a7f37", Verdict.PARTIAL_ROLLBACK: "#b35900",
                   Verdict.ROLLBACK_TO_CLOUD: "#c62828", Verdict.INSUFFICIENT_DATA: "#57606a"}
VERDICT_TEXT = {Verdict.KEEP_EDGE: "keep the edge route everywhere",
                Verdict.PARTIAL_ROLLBACK: "roll some segments back to the cloud",
                Verdict.ROLLBACK_TO_CLOUD: "roll the whole release back to the cloud",
                Verdict.INSUFFICIENT_DATA: "not enough data to decide"}
UNKNOWN = "unknown"  # a device that did not report its chip or OS version: a lead too, never merged away
OWN_SHORT = {Verdict.ROLLBACK_TO_CLOUD: "fail", Verdict.KEEP_EDGE: "pass", Verdict.INSUFFICIENT_DATA: "not judged"}
SIDE_COLOURS = {"domain": ["edge", "cloud"], "range": ["#d1495b", "#2e86ab"]}
STATUS_COLOURS = {"domain": [Status.PASS, Status.FAIL, Status.INSUFFICIENT_DATA],
                  "range": ["#2e7d32", "#c62828", "#9e9e9e"]}
DECISION_COLOURS = {"domain": [Verdict.KEEP_EDGE, Verdict.ROLLBACK_TO_CLOUD, Verdict.INSUFFICIENT_DATA],
                    "range": ["#2e7d32", "#c62828", "#9e9e9e"]}


def report_filename(release: str) -> str:
    """report-<release>.html, with anything but letters, digits, '.', '_' and '-' replaced."""
    return f"report-{re.sub(r'[^A-Za-z0-9._-]', '_', release)}.html"


def write_report(con: duckdb.DuckDBPyConnection, release: str, config: Config, out: Path,
                 as_of: datetime | None = None, result: GateResult | None = None,
                 candidates: list[Path] | None = None, index_href: str | None = None,
                 story: ReleaseStory | None = None) -> Path:
    """Write the report of `release` to `out` (an .html file) and return its path.

    `result` is the gate's evaluation to show; without it the gate is evaluated here (as of `as_of`).
    The connection's derived fields follow `config` (as the gate's do). `index_href`: a link back to
    the index page of a folder of reports (nightly --report-dir). `story`: the routes as the rollout has
    them (views/story.py), read from the warehouse when not given."""
    from pipeline.gate.evaluate import evaluate_gate
    from pipeline.warehouse.aggregate import use_settings

    use_settings(con, config)
    if result is None:
        result = evaluate_gate(con, release, config, as_of=as_of)
    elif result.release != release:
        raise ValueError(f"result is for release {result.release!r}, not {release!r}")
    data = _chart_data(con, result)
    data["matrix"] = _matrix_data(con, result, config)
    data["ledger"] = _ledger_data(con, result, config, candidates)
    data["story"] = story or read_story(con, result.to_dict(), config)
    data["actions"] = _actions(con, result)
    data["published"] = last_published(con, release)
    data["intraday"] = intraday_latency(con, release)
    page = _page(result, config, data, index_href)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out


def write_reports(con: duckdb.DuckDBPyConnection, results: list[GateResult], config: Config,
                  folder: Path, stories: list[ReleaseStory] | None = None) -> Path:
    """The nightly hook: report-<release>.html for every result, then index.html; returns the index.
    `stories`: the results' stories as the judge told them, else read from the warehouse."""
    stories = stories or [read_story(con, r.to_dict(), config) for r in results]
    for r, story in zip(results, stories, strict=True):
        write_report(con, r.release, config, Path(folder) / report_filename(r.release), result=r,
                     index_href="index.html", story=story)
    return write_index(Path(folder), results, stories)


def write_index(folder: Path, results: list[GateResult], stories: list[ReleaseStory]) -> Path:
    """index.html in `folder`: one row per release with its verdict and routes, linking report-<release>.html."""
    rows = []
    for r, story in sorted(zip(results, stories, strict=True), key=lambda rs: rs[0].release):
        name = report_filename(r.release)
        rows.append(
            f"<tr><td><a href=\"{_e(name)}\">{_e(r.release)}</a></td>"
            f"<td><span class=\"badge\" style=\"background:{VERDICT_COLOURS.get(r.verdict, '#57606a')}\">"
            f"{_e(r.verdict)}</span></td><td class=\"routes\">{_e(story.routes_text())}</td>"
            f"<td>{r.window_start:%Y-%m-%d %H:%M} .. {r.window_end:%Y-%m-%d %H:%M} UTC</td><td>{_e(r.note)}</td></tr>")
    body = ("<h1>Release reports</h1>"
            f"<p>{len(results)} release{'s' if len(results) != 1 else ''} evaluated.</p>"
            "<table class=\"index\"><thead><tr><th>release</th><th>verdict</th><th>routes (segments)</th>"
            "<th>window</th><th>why</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "index.html"
    out.write_text(_document("Release reports", body, script=""), encoding="utf-8")
    return out


# ------------------------------------------------------------------ data


def _chart_data(con: duckdb.DuckDBPyConnection, result: GateResult) -> dict[str, Any]:
    window = {"release": result.release, "window_start": result.window_start, "window_end": result.window_end}
    return {
        "latency": sqlfiles.dicts(con, "report/latency", window),
        "temperature": sqlfiles.dicts(con, "report/temperature", {**window, "points": TEMPERATURE_POINTS}),
        "daily": sqlfiles.dicts(con, "report/daily_rates", window),
        "quarantined": sqlfiles.run(con, "report/quarantined", {"release": result.release}).fetchone()[0],
    }


def _matrix_data(con: duckdb.DuckDBPyConnection, result: GateResult, config: Config) -> dict[str, Any]:
    """The chip x OS heat map: the gate that fails in most rolled-back segments (of those a drill splits into
    rates), its figure per (soc, os_version) pooled over those segments (pipeline/gate/drill.py)."""
    from collections import Counter

    from pipeline.gate.drill import READS, drill

    rolled = [s for s in result.segments if s.decision == Verdict.ROLLBACK_TO_CLOUD]
    failing = Counter(g for s in rolled for g in s.failed_gates if g in READS and g != GateName.QUALITY_LOSS)
    if not failing:
        return {"gate": None, "cells": []}
    gate = max(failing, key=lambda g: (failing[g], -GATE_NAMES.index(g)))  # a tie: the registry's first
    segments = [s.key for s in rolled if gate in s.failed_gates]
    found = drill(con, result, config, ("soc", "os_version"), segments=segments, gates=[gate])
    pooled: dict[tuple[str, str], list[float]] = {}
    for d in found.drills:
        for c in d.raw:
            acc = pooled.setdefault((c.values["soc"], c.values["os_version"]), [0.0, 0.0, 0.0, 0.0])
            for i, v in enumerate((c.k, c.n, c.devices, max(0.0, c.excess))):
                acc[i] += v
    excess = sum(a[3] for a in pooled.values()) or 1.0
    cells = [{"soc": _known(soc), "os_version": _known(os), "figure": k / n, "count": int(n), "devices": int(dev),
              "few": dev < config.min_devices, "share_of_excess": e / excess}
             for (soc, os), (k, n, dev, e) in sorted(pooled.items()) if n > 0]
    first = found.drills[0]
    largest = max(found.drills, key=lambda d: sum(c.n for c in d.raw))
    return {"gate": gate, "what": first.what, "threshold": first.threshold, "segments": segments, "cells": cells,
            "answer": f"{largest.segment}: {largest.answer}"}


def _known(value: str) -> str:
    return UNKNOWN if value == NULL else value


DECISION_ORDER = {Verdict.ROLLBACK_TO_CLOUD: 0, Verdict.KEEP_EDGE: 1, Verdict.INSUFFICIENT_DATA: 2}


def failing_first(segments: list[Segment]) -> list[Segment]:
    """Segments as the page lists them: those that roll back, then those that keep the edge, then the rest."""
    return sorted(segments, key=lambda s: DECISION_ORDER.get(s.decision, 3))


def _clean(v: Any) -> Any:
    """JSON-safe: NaN/inf to null, dates to ISO text."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, datetime | date):
        return v.isoformat()
    return v


def _values(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in r.items()} for r in rows]


def _order(values: Iterable[str], known: Sequence[str]) -> list[str]:
    present = set(values)
    return [v for v in known if v in present] + sorted(present - set(known))


# ------------------------------------------------------------------ charts


def _specs(result: GateResult, config: Config, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One Vega-Lite spec per chart. The rows go in as named datasets after Altair has validated the
    spec, so validation does not walk thousands of data points."""
    import altair as alt

    builders = {
        "matrix": lambda ds: _matrix_chart(alt, ds, data["matrix"]),
        "latency": lambda ds: _latency_chart(alt, ds, config, data["latency"]),
        "memory": lambda ds: _memory_chart(alt, ds, result),
        "temperature": lambda ds: _temperature_chart(alt, ds, config, data["temperature"]),
        "daily": lambda ds: _daily_chart(alt, ds, data["daily"]),
        "rows": lambda ds: _rows_chart(alt, ds, result, config),
    }
    specs = {}
    for name, build in builders.items():
        datasets: dict[str, list[dict[str, Any]]] = {}
        spec = build(datasets).to_dict()
        spec.setdefault("datasets", {}).update(datasets)
        specs[name] = spec
    return specs


def _named(alt: Any, datasets: dict[str, list[dict[str, Any]]], name: str, values: list[dict[str, Any]]) -> Any:
    datasets[name] = values
    return alt.Data(name=name)


def _latency_chart(alt: Any, ds: dict, config: Config, rows: list[dict[str, Any]]) -> Any:
    values = []
    for r in rows:
        q = r["total_ms_q"] or [None, None, None]
        budget = config.gates_for(r["task"]).inference_duration.max_p95_ms
        for label, v in zip(("p50", "p95", "p99"), q, strict=True):
            values.append({"task": r["task"], "network_bucket": r["network_bucket"], "side": r["side"],
                           "rows": r["total_n"], "percentile": label, "ms": _clean(v), "budget_ms": budget})
    buckets = _order((v["network_bucket"] for v in values), BUCKETS)
    base = alt.Chart(_named(alt, ds, "latency", values))
    bars = base.mark_bar().encode(
        x=alt.X("percentile:N", title=None, sort=["p50", "p95", "p99"], axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("side:N", sort=["edge", "cloud"]),
        y=alt.Y("ms:Q", title="total_ms"),
        color=alt.Color("side:N", scale=alt.Scale(**SIDE_COLOURS), title="route"),
        tooltip=["task:N", "network_bucket:N", "side:N", "percentile:N", alt.Tooltip("ms:Q", format=",.0f"),
                 alt.Tooltip("rows:Q", format=",")])
    budget = base.mark_rule(color="#333", strokeDash=[4, 3]).encode(
        y="mean(budget_ms):Q", tooltip=[alt.Tooltip("mean(budget_ms):Q", title="p95 budget (ms)", format=",.0f")])
    return (alt.layer(bars, budget).properties(width=150, height=160)
            .facet(row=alt.Row("task:N", title="task"),
                   column=alt.Column("network_bucket:N", title="network bucket", sort=buckets))
            .resolve_scale(y="shared")
            .properties(title="total_ms by network bucket: edge vs cloud (dashed: the task's p95 budget)"))


def _matrix_chart(alt: Any, ds: dict, matrix: dict[str, Any]) -> Any:
    cells = matrix["cells"]
    pooled: dict[str, list[float]] = {}
    for c in cells:
        acc = pooled.setdefault(c["soc"], [0.0, 0.0])
        acc[0] += c["figure"] * c["count"]
        acc[1] += c["count"]
    socs = sorted(pooled, key=lambda s: (-pooled[s][0] / pooled[s][1], s))  # the worst chip, over every OS, on top
    base = alt.Chart(_named(alt, ds, "matrix", cells)).encode(
        x=alt.X("os_version:N", title="OS version", sort="ascending", axis=alt.Axis(labelAngle=0, orient="top")),
        y=alt.Y("soc:N", title="SoC", sort=socs))
    rect = base.mark_rect(stroke="white").encode(
        color=alt.Color("figure:Q", title=matrix.get("what") or "figure",  # white up to the threshold, then red
                        scale=alt.Scale(domain=[0, matrix.get("threshold") or 0.05, 1],
                                        range=["#ffffff", "#fde0dd", "#b71c1c"]),
                        legend=alt.Legend(format="%", orient="bottom", titleLimit=0)),
        opacity=alt.condition("datum.few", alt.value(0.25), alt.value(1.0)),
        tooltip=["soc:N", "os_version:N", alt.Tooltip("figure:Q", format=".1%"), "count:Q", "devices:Q",
                 alt.Tooltip("share_of_excess:Q", format=".0%", title="share of the excess")])
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("figure:Q", format=".0%"),
        color=alt.condition("datum.figure > 0.5 && !datum.few", alt.value("white"), alt.value("#24292f")),
        opacity=alt.condition("datum.few", alt.value(0.45), alt.value(1.0)))
    title = "no gate fails in a rolled-back segment: nothing to locate"
    if matrix["gate"]:
        title = (f"{gate_label(matrix['gate'])}: {matrix['what']} per SoC and OS, over the "
                 f"{len(matrix['segments'])} segments it fails in (threshold {matrix['threshold']:.0%})")
    return alt.layer(rect, text).properties(width=alt.Step(64), height=alt.Step(22), title=title)


def _memory_chart(alt: Any, ds: dict, result: GateResult) -> Any:
    values = []
    for s in result.segments:
        for gate, label in ((GateName.PEAK_MEMORY, "peak"), (GateName.RESIDENT_MEMORY, "resident")):
            c = s.checks.get(gate)
            if c is None or c.measured is None:
                continue
            lo, hi = c.interval if c.interval else (c.measured, c.measured)
            lo, hi = (c.measured if lo is None else lo), (c.measured if hi is None else hi)  # an open side
            values.append({"device_tier": s.device_tier, "segment": s.key, "where": f"{s.task}/{s.network_bucket}",
                           "memory": label, "p95_ratio": _clean(c.measured), "lo": _clean(lo), "hi": _clean(hi),
                           "threshold": c.threshold, "status": c.status, "rows": c.rows})
    tiers = _order((v["device_tier"] for v in values), TIERS)
    base = alt.Chart(_named(alt, ds, "memory", values))
    x = alt.X("device_tier:N", sort=tiers, title="device tier", axis=alt.Axis(labelAngle=0))
    offset = alt.XOffset("where:N")
    errors = base.mark_rule(opacity=0.6).encode(x=x, xOffset=offset, y="lo:Q", y2="hi:Q",
                                               color=alt.Color("status:N", scale=alt.Scale(**STATUS_COLOURS)))
    points = base.mark_point(filled=True, size=45).encode(
        x=x, xOffset=offset, y=alt.Y("p95_ratio:Q", title="p95 of memory / device RAM", axis=alt.Axis(format="%"),
                                     scale=alt.Scale(zero=True)),
        color=alt.Color("status:N", scale=alt.Scale(**STATUS_COLOURS), title="gate"),
        tooltip=["segment:N", "memory:N", alt.Tooltip("p95_ratio:Q", format=".1%"), alt.Tooltip("lo:Q", format=".1%"),
                 alt.Tooltip("hi:Q", format=".1%"), alt.Tooltip("threshold:Q", format=".0%"), "status:N", "rows:Q"])
    line = base.mark_rule(color="#c62828", strokeDash=[6, 3], size=2).encode(y="mean(threshold):Q")
    label = base.mark_text(align="left", dx=4, dy=-6, color="#c62828").encode(
        x=alt.value(0), y="mean(threshold):Q", text=alt.Text("mean(threshold):Q", format=".0%"))
    return (alt.layer(errors, points, line, label).properties(width=360, height=240)
            .facet(column=alt.Column("memory:N", title=None, sort=["peak", "resident"]))
            .resolve_scale(y="shared")
            .properties(title="memory p95 per segment, by tier, with the decision's interval "
                              "(dashed: the gate's limit)"))


def _temperature_chart(alt: Any, ds: dict, config: Config, rows: list[dict[str, Any]]) -> Any:
    values = _values(rows)
    tiers = _order((v["device_tier"] for v in values), TIERS)
    rise_budget = config.gates.thermal.max_p95_rise_c
    points = alt.Chart(_named(alt, ds, "temperature", values)).mark_circle(size=14, opacity=0.45).encode(
        x=alt.X("total_ms:Q", title="total_ms"), y=alt.Y("temp_rise_c:Q", title="temperature rise (°C)"),
        color=alt.Color("device_tier:N", title="tier", scale=_tier_colours(alt, tiers)),
        tooltip=["task:N", "device_tier:N", "network_bucket:N", alt.Tooltip("total_ms:Q", format=",.0f"),
                 alt.Tooltip("temp_rise_c:Q", format=".2f"), "throttled:N"])
    marks = alt.Data(values=[{"ms": OVER_10S_MS, "label": "10 s"}])
    ten = alt.Chart(marks).mark_rule(color="#333", strokeDash=[6, 3], size=2).encode(x="ms:Q")
    ten_label = alt.Chart(marks).mark_text(align="left", dx=4, y=8, color="#333").encode(x="ms:Q", text="label:N")
    budget = alt.Data(values=[{"rise": rise_budget, "label": f"p95 rise budget {rise_budget:g} °C"}])
    rise = alt.Chart(budget).mark_rule(color="#c62828", strokeDash=[2, 2]).encode(y="rise:Q")
    rise_label = alt.Chart(budget).mark_text(align="right", x="width", dy=-6, color="#c62828").encode(
        y="rise:Q", text="label:N")
    return (alt.layer(points, ten, ten_label, rise, rise_label).properties(width=760, height=320)
            .properties(title=f"edge rows: temperature rise against total_ms ({len(values):,} rows sampled)"))


def _tier_colours(alt: Any, tiers: list[str]) -> Any:
    known = {Tier.LOW: "#d62728", Tier.MID: "#ff7f0e", Tier.HIGH: "#2ca02c", Tier.FLAGSHIP: "#1f77b4"}
    spare = iter(["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"] * 10)
    return alt.Scale(domain=tiers, range=[known.get(t) or next(spare) for t in tiers])


def _daily_chart(alt: Any, ds: dict, rows: list[dict[str, Any]]) -> Any:
    values = []
    for r in _values(rows):
        for metric in ("adoption_rate", "fallback_rate"):
            values.append({"day": r["day"], "side": r["side"], "rows": r["rows"], "metric": metric,
                           "rate": r[metric]})
    lines = alt.Chart(_named(alt, ds, "daily", values)).mark_line(point=True).encode(
        x=alt.X("day:T", title="day (UTC)", timeUnit="utcyearmonthdate", axis=alt.Axis(format="%b %d")),
        y=alt.Y("rate:Q", title=None, axis=alt.Axis(format="%"), scale=alt.Scale(zero=True)),
        color=alt.Color("side:N", scale=alt.Scale(**SIDE_COLOURS), title="route"),
        tooltip=[alt.Tooltip("day:T", timeUnit="utcyearmonthdate"), "side:N", "metric:N",
                 alt.Tooltip("rate:Q", format=".2%"), alt.Tooltip("rows:Q", format=",")])
    return (lines.properties(width=360, height=200)
            .facet(column=alt.Column("metric:N", title=None, sort=["adoption_rate", "fallback_rate"]))
            .resolve_scale(y="independent")
            .properties(title="adoption and fallback rate by day, edge vs cloud (daily rollup)"))


def _rows_chart(alt: Any, ds: dict, result: GateResult, config: Config) -> Any:
    values = [{"segment": s.key, "rows": s.rows, "decision": s.decision} for s in failing_first(result.segments)]
    minimum = config.min_rows_per_segment
    bars = alt.Chart(_named(alt, ds, "rows", values)).mark_bar().encode(
        y=alt.Y("segment:N", sort=None, title=None),
        x=alt.X("rows:Q", title="edge rows in the window (square-root scale)", scale=alt.Scale(type="sqrt")),
        color=alt.Color("decision:N", scale=alt.Scale(**DECISION_COLOURS), title="decision"),
        tooltip=["segment:N", alt.Tooltip("rows:Q", format=","), "decision:N"])
    marks = alt.Data(values=[{"rows": minimum, "label": f"minimum {minimum}"}])
    line = alt.Chart(marks).mark_rule(color="#333", strokeDash=[6, 3], size=2).encode(x="rows:Q")
    label = alt.Chart(marks).mark_text(align="left", dx=4, y=-6, color="#333").encode(x="rows:Q", text="label:N")
    return (alt.layer(bars, line, label).properties(width=620, height=alt.Step(14))
            .properties(title=f"edge rows per segment (dashed: min_rows_per_segment = {minimum})"))


# ------------------------------------------------------------------ HTML


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _threshold_text(c: GateCheck) -> str:
    return limit_text(c, short=True).replace("<=", "≤ ").replace(">=", "≥ ")


def _cell(c: GateCheck | None, judged: bool = True) -> str:
    """A gate's cell; a segment too small to judge shows its figures without failure marks."""
    if c is None:
        return "<td></td>"
    status = c.status if judged else Status.INSUFFICIENT_DATA
    classes = [status] + (["borderline"] if c.borderline and judged else []) + (
        ["observe"] if c.mode == "observe" else [])
    detail = [f"{c.gate} ({c.mode}): {c.status}"]
    if c.measured is not None:
        shown = interval_text(c.interval, BY_NAME[c.gate].unit, c.interval_alpha)
        detail.append(f"measured {figure_of(c.gate, c.measured)}" + (f", {shown}" if shown else ""))
    if c.threshold is not None:
        detail.append(f"threshold {limit_text(c)}")
    if c.baseline is not None:
        detail.append(f"cloud baseline {figure_of(c.gate, c.baseline)} ({c.baseline_level})")
    if c.p_value is not None:
        detail.append(p_text(c.p_value))
    if c.note:
        detail.append(c.note)
    if c.status == Status.NOT_APPLICABLE:
        text = "–"
    elif c.measured is None:
        text = "?" if c.status == Status.INSUFFICIENT_DATA else ""
    else:
        mark = ({Status.FAIL: " ✗", Status.INSUFFICIENT_DATA: " ?"}.get(c.status, "") + ("~" if c.borderline else "")
                if judged else "")
        text = f"<b>{_e(figure_of(c.gate, c.measured, short=True))}{mark}</b><small>{_e(_threshold_text(c))}</small>"
    return f"<td class=\"{' '.join(classes)}\" title=\"{_e('; '.join(detail))}\">{text}</td>"


def _gate_table(result: GateResult, story: ReleaseStory) -> str:
    gates = [g for g in GATE_NAMES if any(g in s.checks for s in result.segments)]
    head = "".join(f"<th title=\"{_e(g)}\">{_e(BY_NAME[g].column)}</th>" for g in gates)
    by_key = {s.key: s for s in result.segments}
    body = []
    for route, cause, decision, members in story.groups():  # as the terminal: farthest from the edge first
        body.append(f"<tr class=\"group {_e(route)}\"><th colspan=\"{len(gates) + 5}\">"
                    f"{_e(group_heading(route, cause, decision, len(members)))}</th></tr>")
        for m in members:  # the route and the own decision right after the segment: visible on any screen
            s = by_key[m.segment]
            own = f"needs {s.needs_rows} more rows" if s.needs_rows else OWN_SHORT[s.decision]
            fb = s.checks.get(GateName.FALLBACK_RATE)
            baseline = fb.baseline_level if fb and fb.baseline_level else "–"
            body.append(f"<tr><th scope=\"row\" class=\"seg\">{_e(s.key)}</th>"
                        f"<td class=\"route {_e(m.route)}\" title=\"{_e(m.why)}\">{_e(ROUTE_WORDS[m.route])}</td>"
                        f"<td class=\"decision {_e(s.decision)}\" title=\"{_e(m.evidence)}\">{_e(own)}</td>"
                        f"<td class=\"num\">{s.rows:,}</td>"
                        + "".join(_cell(s.checks.get(g), s.decision != Verdict.INSUFFICIENT_DATA) for g in gates)
                        + f"<td class=\"baseline\">{_e(baseline)}</td></tr>")
    return ("<div class=\"table-wrap\"><table class=\"gates\"><thead><tr><th class=\"seg\">segment</th>"
            "<th class=\"route\">route</th><th class=\"decision\">own gates</th><th>rows</th>" + head
            + "<th>cloud baseline</th></tr></thead><tbody>" + "".join(body) + "</tbody></table></div>")


def _facts(result: GateResult, config: Config, data: dict[str, Any]) -> str:
    segments = result.segments
    judged = [s for s in segments if s.decision != Verdict.INSUFFICIENT_DATA]
    rolled = [s for s in judged if s.decision == Verdict.ROLLBACK_TO_CLOUD]
    edge_rows = sum(s.rows for s in segments)
    cloud_rows = sum(r["rows"] for r in data["latency"] if r["side"] == Side.CLOUD)
    levels: dict[str, int] = {}
    for s in segments:
        fb = s.checks.get(GateName.FALLBACK_RATE)
        level = fb.baseline_level if fb and fb.baseline_level else "none (too few cloud rows)"
        levels[level] = levels.get(level, 0) + 1
    baseline = "; ".join(f"{lvl}: {n} segment{'s' if n != 1 else ''}" for lvl, n in levels.items()) or "–"
    q = result.release_wide.get(GateName.QUALITY_LOSS)
    quality = "–"
    if q is not None:
        quality = f"{q.status}"
        if q.measured is not None:
            quality = (f"{percent(q.measured)} relative adoption loss (threshold {_threshold_text(q)}"
                       + (f", {p_text(q.p_value)}" if q.p_value is not None else "") + f"): {q.status}")
        if q.baseline is not None:
            quality += f"; cloud adoption {percent(q.baseline)} over {q.extra.get('cloud_rows', 0):,} cloud rows"
    facts = [
        ("window", f"{result.window_start:%Y-%m-%d %H:%M} .. {result.window_end:%Y-%m-%d %H:%M} UTC "
                   f"({result.window.days} whole days before the as-of day)"),
        ("routes", f"{data['story'].routes_text()} ({data['story'].headline})"),
        ("segments", f"{len(segments)} (task x tier x network bucket): {len(judged)} judged, {len(rolled)} fail "
                     f"their own gates, {len(segments) - len(judged)} not judged (too little data)"),
        ("rows counted", f"{edge_rows:,} edge rows judged by the gate; {cloud_rows:,} cloud rows in the window"),
        ("rows quarantined", f"{data['quarantined']:,} rows of release {result.release} failed the data contract "
                             "at ingestion (not counted above)"),
        ("cloud baseline", f"the cloud rows of the same release; fallback-rate baseline by level: {baseline}"),
        ("release-wide quality", quality),
        *[(f"release-wide {BY_NAME[name].label}", f"{figure_of(name, c.measured)} (threshold {_threshold_text(c)}"
           + (f", {p_text(c.p_value)}" if c.p_value is not None else "") + f"): {c.status}")
          for name, c in result.release_wide.items() if name != GateName.QUALITY_LOSS and c.measured is not None],
        ("hold-back split", _split(result)),
        ("evaluated", f"{result.evaluated_at:%Y-%m-%d %H:%M} UTC with {result.config_source} "
                      f"(digest {result.config_digest})"),
        *[("override (a person's action)", line) for line in data["story"].overrides],
        *[("held", line) for line in data["story"].held],
        ("people's actions", "; ".join(data["actions"]) or "none"),
        ("routing published", "; ".join(published_text(p) for p in data["published"])
         or "nowhere: no publish.targets (docs/publishing.md)"),
        *([("intra-day look", intraday_text(data["intraday"]))] if data["intraday"] else []),
        ("read from", f"snapshot {result.snapshot['id']} published {result.snapshot['published_at']}: a writer "
                      "held the warehouse" if result.snapshot else "the warehouse"),
    ]
    return "<dl class=\"facts\">" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts) + "</dl>"


def _actions(con: duckdb.DuckDBPyConnection, result: GateResult) -> list[str]:
    """People's actions on the release, in words."""
    from pipeline.rollout.actions import recorded

    return [f"{a.action} {a.segment}: {a.describe()}" for a in recorded(con, result.release)]


def _split(result: Any) -> str:
    """The assignment check in one line: the release's split found against the declared one, and what is off."""
    split = result.assignment
    if split is None or not split.scopes:
        return "–"
    if split.status == Status.FAIL:
        return split.summary()
    declared = f"; declared by {split.declared_by}" if split.declared_by else ""
    return f"{split.scopes[0].reason}: {split.status} ({split.unit}s assigned{declared})"


def _failing_summary(segments: list[Segment]) -> str:
    failed: dict[str, int] = {}
    for s in segments:
        if s.decision == Verdict.INSUFFICIENT_DATA:
            continue
        for g in s.failed_gates:
            failed[g] = failed.get(g, 0) + 1
    if not failed:
        return ""
    parts = ", ".join(f"{g} ({n})" for g, n in sorted(failed.items(), key=lambda kv: -kv[1]))
    return f"<p class=\"failing\">Failing enforced gates (judged segments): {_e(parts)}</p>"


CAPTIONS = {
    "matrix": "Where the failure is: the gate that fails in most rolled-back segments, split by chip and OS "
              "version (each square: its figure on those devices, pooled over those segments; hover for counts and "
              "its share of the excess). The worst chip is on top; a faded square has fewer devices than "
              "min_devices, too few to read alone; \"unknown\" is a device that did not report its chip or OS "
              "version. pipeline drill --release R gives every dimension, the cells flagged and a one-line answer.",
    "latency": "Bars: p50, p95 and p99 of total_ms over the window, edge beside cloud, per task and network "
               "bucket, on one scale for every panel. The gate judges the edge p95 per segment "
               "(inference_duration) and, in weak networks, against the cloud's p95 (weak_network_latency).",
    "memory": "Each point is one segment's p95 of peak or resident memory as a share of the device's RAM, as "
              "the gate measured it, with the interval its decision used; red points fail the gate.",
    "temperature": f"A deterministic sample of up to {TEMPERATURE_POINTS:,} edge rows in the window (smallest "
                   "hash of event_id). Right of the 10 s line the user waited more than 10 seconds.",
    "daily": "Daily shares of requests whose answer was adopted, and of requests that fell back (user edit, "
             "regenerate, undo, or automatic fallback), from the daily rollup, each axis from zero; first and last "
             "day may be partial.",
    "rows": "Edge rows each segment has in the window; a segment below the minimum is insufficient_data.",
}
TITLES = {"matrix": "Device matrix: chip x OS",
          "latency": "Latency: edge vs cloud", "memory": "Memory per tier", "temperature": "Heat against duration",
          "daily": "Adoption and fallback by day", "rows": "Rows per segment"}


def _page(result: GateResult, config: Config, data: dict[str, Any], index_href: str | None = None) -> str:
    specs = _specs(result, config, data)
    colour = VERDICT_COLOURS.get(result.verdict, "#57606a")
    sections = {
        n: f"<section class=\"chart\"><h2>{_e(TITLES[n])}</h2><p class=\"caption\">{_e(CAPTIONS[n])}</p>"
           f"<div id=\"chart-{n}\" class=\"vis\"></div></section>" for n in CHARTS}
    answer = data["matrix"].get("answer")
    matrix = sections.pop("matrix")  # where the failure is, before the tables: people look before they read
    if answer:
        matrix = matrix.replace("</p>", f"</p><p id=\"matrix-answer\" class=\"answer\">{_e(answer)}</p>", 1)
    charts = "".join(sections.values())
    nav = f"<nav><a id=\"index-link\" href=\"{_e(index_href)}\">&larr; all releases</a></nav>" if index_href else ""
    body = (
        f"<header>{nav}<h1>Release {_e(result.release)}: rollback report</h1>"
        f"<div id=\"verdict\" class=\"verdict\" style=\"background:{colour}\">"
        f"<span class=\"label\">verdict</span> <strong id=\"verdict-text\">{_e(result.verdict)}</strong>"
        f"<span class=\"what\">{_e(VERDICT_TEXT.get(result.verdict, ''))}: {_e(result.note)}</span></div>"
        f"</header>{_failing_summary(result.segments)}{_facts(result, config, data)}{matrix}"
        "<h2>Gate table</h2><p class=\"caption\">Each cell: the measured value over its threshold. "
        "<span class=\"key fail\">✗ failed</span> <span class=\"key insufficient_data\">? insufficient data</span> "
        "<span class=\"key not_applicable\">– not applicable</span> <span class=\"key borderline\">~ past the "
        "threshold, not yet proven (more devices could fail it)</span> <span class=\"key observe\">observe-only gate "
        "(never blocks)</span>. A segment too small to judge shows its figures unmarked. Hover a cell for the "
        "interval, baseline and p-value.</p>"
        f"{_gate_table(result, data['story'])}{_ledger_section(data.get('ledger'))}{charts}"
        "<footer><p id=\"report-status\" data-charts=\"" + str(len(CHARTS)) + "\">charts: drawing…</p>"
        "<p>Written by <code>pipeline report</code> from the gate's own evaluation; chart data from sql/report/. "
        "Works offline: every script and style is in this file.</p></footer>")
    return _document(f"Release {result.release}: {result.verdict}", body, script=_script(specs))


# ------------------------------------------------------------------ ledger and estimates


def _ledger_data(con: duckdb.DuckDBPyConnection, result: GateResult, config: Config,
                 candidates: list[Path] | None) -> Any:
    """The ledger over the gate's own window, with the estimate-beside-measurement tables."""
    from pipeline.planning.ledger import compute_ledger

    return compute_ledger(con, result.release, config, as_of=result.as_of, candidates=candidates)


def _ledger_section(ledger: Any) -> str:
    """The account (pipeline/planning/ledger.py) and, per task with a candidate file, the estimate beside the field."""
    if ledger is None:
        return ""
    from pipeline.planning.estimates import fmt as fmt_estimate
    from pipeline.planning.ledger import NO_COSTS_HINT, RELEASE_LINES, line_label, value_text

    quiet = ledger.no_costs_declared
    rows = []
    for name in RELEASE_LINES:
        f = ledger.totals[name]
        missing = f" (missing: {', '.join(f.missing)})" if f.missing and not quiet else ""
        rows.append(f"<tr><th scope=\"row\">{_e(line_label(name))}</th>"
                    f"<td class=\"num\">{_e(value_text(f, ledger.currency))}</td>"
                    f"<td class=\"basis\">{_e(f.basis + missing)}</td></tr>")
    missing = ledger.missing_costs
    costs = (f"<p class=\"caption\" id=\"ledger-missing\">No costs declared: {_e(NO_COSTS_HINT)}.</p>" if quiet
             else f"<p class=\"caption\" id=\"ledger-missing\">Costs missing, so these terms are not computed: "
             f"{_e(', '.join(missing))}.</p>" if missing else "")
    html_out = ("<section id=\"ledger\"><h2>Ledger: what the edge served, saved and cost</h2>"
                "<p class=\"caption\">The same window as the gate"
                + ("" if quiet else f"; amounts in {_e(ledger.currency or '(no currency)')}") +
                f" from {_e(ledger.config_source)}. Per segment: <code>pipeline ledger --release "
                f"{_e(ledger.release)}</code>.</p>{costs}"
                "<table class=\"ledger\"><thead><tr><th>figure</th><th>value</th><th>computed from</th></tr>"
                "</thead><tbody>" + "".join(rows) + "</tbody></table>")
    for table in ledger.estimates:
        html_out += (f"<h3>Estimate beside measurement: {_e(table.task)}</h3><p class=\"caption\">"
                     f"Pre-launch estimate from {_e(table.candidate)} (pipeline admit), field on tiers "
                     f"{_e(', '.join(table.tiers))}; flagged where the field is worse than the estimate by more "
                     f"than x{table.factor:g}.</p>")
        if not table.rows:
            html_out += f"<p>{_e(table.note)}</p>"
            continue
        body = []
        for r in table.rows:
            ratio = "–" if r.ratio is None else f"{r.ratio:.2f}"
            cls = " class=\"fail\"" if r.flagged else ""
            body.append(f"<tr{cls}><th scope=\"row\">{_e(r.dimension)}</th>"
                        f"<td title=\"{_e(r.estimate_basis)}\">{_e(fmt_estimate(r.estimate, r.unit))}</td>"
                        f"<td title=\"{_e(r.measured_basis)}\">{_e(fmt_estimate(r.measured, r.unit))}</td>"
                        f"<td>{_e(ratio)}</td><td class=\"flag\">{'FLAG' if r.flagged else ''}</td>"
                        f"<td class=\"basis\">{_e(r.flag_reason or r.estimate_basis)}</td></tr>")
        html_out += (f"<table class=\"estimates\" data-task=\"{_e(table.task)}\"><thead><tr><th>dimension</th>"
                     "<th>estimate</th><th>field</th><th>ratio</th><th>flag</th><th>why</th></tr></thead><tbody>"
                     + "".join(body) + "</tbody></table>")
    if not ledger.estimates:
        html_out += ("<p class=\"caption\">Estimate beside measurement: no candidate file for the release's tasks "
                     "(gates/candidates/&lt;task&gt;.yaml).</p>")
    return html_out + "</section>"


def _json_for_script(obj: Any) -> str:
    """JSON that cannot end its <script> early: every '<' becomes \\u003c (only strings hold one)."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


@cache
def _vega_bundle() -> str:
    import altair as alt
    import vl_convert

    # the Vega-Lite that Altair writes specs for, where vl-convert has it (else its newest)
    wanted = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    known = getattr(vl_convert, "get_vegalite_versions", list)()
    bundle = vl_convert.javascript_bundle(vl_version=wanted) if wanted in known else vl_convert.javascript_bundle()
    if re.search(r"</script", bundle, re.IGNORECASE):  # would end the inline <script> early
        bundle = re.sub(r"</(script)", r"<\\/\1", bundle, flags=re.IGNORECASE)
    return bundle


RUNNER = """
(function () {
  var specs = __SPECS__;
  var status = document.getElementById("report-status");
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  var jobs = Object.keys(specs).map(function (name) {
    var el = document.getElementById("chart-" + name);
    return vegaEmbed(el, specs[name], {renderer: "svg", actions: false, logLevel: 1})
      .then(function () { el.dataset.drawn = "true"; return true; })
      .catch(function (err) {
        errors.push(name + ": " + err);
        el.dataset.drawn = "false";
        el.textContent = "This chart could not be drawn: " + err;
        console.error("chart " + name + " failed: " + err);
        return false;
      });
  });
  Promise.all(jobs).then(function (ok) {
    var drawn = ok.filter(Boolean).length;
    status.dataset.drawn = String(drawn);
    status.dataset.errors = String(errors.length);
    status.textContent = "charts: " + drawn + " of " + ok.length + " drawn" +
      (errors.length ? "; errors: " + errors.join(" | ") : "");
  });
})();
"""


def _script(specs: dict[str, dict[str, Any]]) -> str:
    runner = RUNNER.replace("__SPECS__", _json_for_script(specs))
    return f"<script>{_vega_bundle()}</script>\n<script>{runner}</script>"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:24px auto;
max-width:1320px;padding:0 16px}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:28px 0 4px}
.verdict{color:#fff;padding:14px 18px;border-radius:8px;display:flex;gap:14px;align-items:baseline;flex-wrap:wrap}
.verdict .label{text-transform:uppercase;font-size:12px;letter-spacing:.08em;opacity:.85}
.verdict strong{font-size:28px;letter-spacing:.02em}.verdict .what{font-size:15px}
.failing{font-weight:600;color:#c62828;margin:10px 0 0}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:14px 0}
dl.facts dt{font-weight:600;color:#57606a}dl.facts dd{margin:0}
.caption{color:#57606a;margin:2px 0 8px;max-width:1000px}
table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #d0d7de;padding:3px 4px;text-align:right}
thead th{background:#f6f8fa;position:sticky;top:0;font-weight:600}
thead th:first-child,thead th:last-child,thead th.decision,thead th.route{text-align:left}
tbody th{text-align:left;font-weight:500;white-space:nowrap}
.table-wrap{overflow-x:auto;max-width:100%}
th.seg{position:sticky;z-index:1;box-sizing:border-box;left:0;width:170px;min-width:170px}
tbody th.seg{background:#fff}thead th.seg{z-index:2}
nav{margin:0 0 6px}nav a{color:#0969da}
td{white-space:nowrap}td b{display:block;font-weight:600}td small{display:block;color:#57606a;font-size:10px}
td.fail{background:#ffd7d5;color:#82071e}td.fail small{color:#82071e}
td.insufficient_data{background:#eaeef2;color:#57606a}td.not_applicable{color:#8c959f;text-align:center}
td.borderline{outline:2px dotted #9a6700;outline-offset:-3px}td.observe{font-style:italic}
td.observe.fail{background:#fff1c2;color:#7d4e00}
td.route{text-align:left;font-weight:600}
tr.group th{text-align:left;background:#f6f8fa;font-weight:600;position:static}tr.group.cloud th{color:#c62828}
tr.group.previous_edge th{color:#c62828}tr.group.edge th{color:#1a7f37}tr.group.edge_with_cloud_check th{color:#9a6700}
td.route.cloud,td.route.previous_edge{color:#c62828}td.route.edge{color:#1a7f37}
td.route.edge_with_cloud_check{color:#9a6700}
td.decision{text-align:left;white-space:normal;min-width:70px}td.decision.rollback_to_cloud{color:#c62828}
td.decision.keep_edge{color:#1a7f37}td.decision.insufficient_data{color:#57606a}
td.baseline{text-align:left;color:#57606a;white-space:normal;min-width:90px}
.key{padding:0 4px;border-radius:3px;white-space:nowrap}
.key.fail{background:#ffd7d5}.key.insufficient_data{background:#eaeef2}
.key.borderline{outline:2px dotted #9a6700}.key.observe{font-style:italic}
.chart{break-inside:avoid}.vis{min-height:60px}
.badge{color:#fff;padding:2px 8px;border-radius:4px;font-weight:600}
table.index td,table.index th{text-align:left;font-size:14px;padding:6px 10px}
footer{margin-top:32px;color:#57606a;font-size:12px}
td.basis{text-align:left;color:#57606a;white-space:normal}table.estimates tr.fail td{background:#ffd7d5}
td.flag{color:#c62828;font-weight:600}
"""


def _document(title: str, body: str, script: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>{body}\n{script}\n</body></html>\n")
