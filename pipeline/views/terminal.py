"""What the person on call reads in a terminal: the gate's verdict view and `explain`.

- The verdict and a one-line summary come first, then the failing segments, then the
  passing ones; the insufficient ones are summarised (`show_all` lists them).
- Figures are in units (%, ms, °C, share of RAM), rounded as people read them.
- Lines fit `width`: the gate table drops the gate columns with the fewest failures
  first and says which; `wide` shows every column under the gates' full names.
- Colour only when asked for (pipeline/cli: a terminal, no NO_COLOR, no --no-color).
Plain string code: no terminal library on the start-up path of `pipeline gate`.
"""

from __future__ import annotations

import math
import os
import shutil
import textwrap
from datetime import timedelta
from typing import Any, TextIO

from pipeline.common.registry import BY_NAME, GATES, GateName
from pipeline.common.registry import label as gate_label
from pipeline.common.units import alpha_text, in_unit, interval_text, limit_text, p_text, percent
from pipeline.common.vocabulary import PREVIOUS_EDGE, CellStatus, Route, Status, Verdict
from pipeline.views.story import OWN_PASS, group_heading

# ------------------------------------------------------------------ the terminal


def terminal_width(stream: TextIO) -> int | None:
    """COLUMNS when set, else the terminal's width; None (no limit) for a file or pipe."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if stream.isatty() else None


def wants_colour(stream: TextIO, no_color: bool = False) -> bool:
    """https://no-color.org: any non-empty NO_COLOR turns colour off, and so does --no-color."""
    return not no_color and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb" and stream.isatty()


class Paint:
    CODES = {"red": "31", "green": "32", "yellow": "33", "dim": "2", "bold": "1", "bold_red": "1;31",
             "bold_green": "1;32", "bold_yellow": "1;33"}

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, style: str | None, text: str) -> str:
        if not self.enabled or not style or not text.strip():
            return text
        return f"\033[{self.CODES[style]}m{text}\033[0m"


# ------------------------------------------------------------------ the gate view

DECISION_STYLE = {Verdict.ROLLBACK_TO_CLOUD: "bold_red", Verdict.KEEP_EDGE: "green",
                  Verdict.INSUFFICIENT_DATA: "yellow"}
ROUTE_STYLE = {Route.CLOUD: "bold_red", PREVIOUS_EDGE: "bold_red", Route.EDGE_WITH_CLOUD_CHECK: "bold_yellow",
               Route.EDGE: "bold_green"}
VERDICT_STYLE = {Verdict.ROLLBACK_TO_CLOUD: "bold_red", Verdict.PARTIAL_ROLLBACK: "bold_red",
                 Verdict.KEEP_EDGE: "bold_green", Verdict.INSUFFICIENT_DATA: "bold_yellow"}
MARKS = ("marks: X failed, ? insufficient data, - not applicable, "
         "~ past the threshold but not yet proven (more devices could fail it), (obs) observe-only (never blocks)")


def _cell(check: Any, observe_column: bool, judged: bool = True) -> tuple[str, str]:
    """(figure, marks): the marks get a slot of their own so the figures stay aligned. A segment too small to
    judge shows its figures without failure marks: nothing about it failed."""
    if check.status == Status.NOT_APPLICABLE:
        return "-", ""
    if check.measured is None:
        return ("?" if check.status == Status.INSUFFICIENT_DATA else ""), ""
    if not judged:
        return in_unit(check.measured, BY_NAME[check.gate].unit, short=True), ""
    mark = {Status.FAIL: "X", Status.INSUFFICIENT_DATA: "?"}.get(check.status, "") + ("~" if check.borderline else "")
    obs = "(obs)" if check.mode == "observe" and not observe_column else ""
    return in_unit(check.measured, BY_NAME[check.gate].unit, short=True), mark + obs


def _task_limit(checks: list[Any]) -> str:
    """A task's threshold; the weak-network one is the cloud's p95 per segment, so its range."""
    if checks[0].gate != GateName.WEAK_NETWORK_LATENCY:
        return limit_text(checks[0], short=True)
    cloud = sorted(c.threshold for c in checks if c.threshold is not None)
    if not cloud:
        return "< cloud"
    shown = in_unit(cloud[0], "ms", True) + ("" if cloud[0] == cloud[-1] else "-" + in_unit(cloud[-1], "ms", True))
    return f"<cloud {shown}"


def window_text(result: Any) -> str:
    """The window as whole UTC days, and what waits (pipeline/gate/window.py)."""
    w = result.window
    held = f", {result.held_back_hours:g} h held back" if result.held_back_hours else ""
    waiting = f"; {w.end:%Y-%m-%d} counts once it is over" if w.cutoff > w.end else ""
    return f"{w.start:%Y-%m-%d} .. {w.end - timedelta(days=1):%Y-%m-%d} UTC ({w.days} whole days{waiting}{held})"


def summary_lines(result: Any, story: Any) -> list[str]:
    """The verdict, the routes and one line of counts: what `gate` prints first."""
    segments = result.segments
    judged = [s for s in segments if s.decision != Verdict.INSUFFICIENT_DATA]
    failing = sum(s.decision == Verdict.ROLLBACK_TO_CLOUD for s in judged)
    lines = [f"verdict for release {result.release}: {result.verdict.upper()} - {result.note}",
             f"routes: {story.routes_text()}",
             f"{len(segments)} segments: {len(judged)} judged ({failing} fail their own gates, "
             f"{len(judged) - failing} pass), {len(segments) - len(judged)} not judged (insufficient data); "
             f"window {window_text(result)}"]
    if result.source.kind != "rollup":
        lines.append(f"read from the window's events, not the rollup: {result.source.reason}")
    for name, rw in result.release_wide.items():
        if rw.measured is None:
            continue
        p = f", {p_text(rw.p_value)}" if rw.p_value is not None else ""
        iv = ""
        if rw.interval and rw.interval_alpha is not None:
            lo, hi = (percent(v) if v is not None else "unbounded" for v in rw.interval)
            iv = f", decision interval {lo} to {hi} at alpha {alpha_text(rw.interval_alpha)}"
        lines.append(f"release-wide {gate_label(name)} {percent(rw.measured)} (threshold {percent(rw.threshold)}"
                     f"{p}{iv}): {rw.status}")
    split = result.assignment
    if split is not None and split.scopes:
        scope = split.scopes[0]
        lines.append(split.summary() if split.status == Status.FAIL else f"assignment: {scope.reason}: {split.status}")
    late = result.late_buckets
    if late:
        lags = ", ".join(f"{b} {result.arrival_lag[b]['p95_hours']:,.0f} h" for b in late)
        lines.append(f"late data: 95 % of rows arrive within {lags} of their event; the window holds back "
                     f"{result.held_back_hours:g} h (completeness_lag_hours), so its newest rows under-represent "
                     f"{', '.join(late)}")
    return lines


def _own_evidence(story: Any) -> list[str]:
    """A line per passing segment with a figure past its threshold and not yet proven: what it would take."""
    return [f"own evidence: {s.segment} {s.evidence}" for s in story.segments
            if s.decision == Verdict.KEEP_EDGE and s.evidence != OWN_PASS]


def _insufficient_summary(segments: list[Any]) -> str:
    few = [s for s in segments if s.needs_rows]
    lacking: dict[str, int] = {}
    for s in segments:
        if not s.needs_rows:
            for g, c in s.checks.items():
                if c.mode == "enforce" and c.status == Status.INSUFFICIENT_DATA:
                    lacking[g] = lacking.get(g, 0) + 1
    parts = []
    if few:
        need = sorted(s.needs_rows for s in few)
        span = f"{need[0]:,}" if need[0] == need[-1] else f"{need[0]:,}-{need[-1]:,}"
        parts.append(f"{len(few)} have too few rows (need {span} more)")
    if lacking:
        gates = ", ".join(f"{g} {n}x" for g, n in lacking.items())
        parts.append(f"{len(segments) - len(few)} lack an enforced gate's inputs ({gates})")
    return f"{'; '.join(parts)}; --all lists them"


def _fit(fixed: int, gate_widths: dict[str, int], priority: list[str], width: int | None) -> list[str]:
    """The gates whose columns fit in `width`, most failures first; in registry order."""
    if width is None:
        return list(gate_widths)
    used, kept = fixed, []
    for g in priority:
        if used + 2 + gate_widths[g] <= width:
            kept.append(g)
            used += 2 + gate_widths[g]
    return [g for g in gate_widths if g in kept]


def gate_view(result: Any, story: Any, width: int | None = None, colour: bool = False, wide: bool = False,
              show_all: bool = False) -> str:
    """The gate's terminal view (module docstring): one group per route and its reason (views/story.py),
    one column per gate. `width` None: no limit."""
    paint = Paint(colour)
    limit = None if wide else width
    segments = result.segments
    by_key = {s.key: s for s in segments}
    groups = [(route, group_heading(route, cause, decision, len(members)), [by_key[m.segment] for m in members])
              for route, cause, decision, members in story.groups()]
    shown = [s for _, _, group in groups for s in group if show_all or s.decision != Verdict.INSUFFICIENT_DATA]
    gates = [g.name for g in GATES if any(g.name in s.checks for s in segments)]
    observe = {g: all(s.checks[g].mode == "observe" for s in segments) for g in gates}
    title = {g: (g if wide else BY_NAME[g].column) + (" (obs)" if observe[g] else "") for g in gates}
    tasks = sorted({s.task for s in segments})
    thresholds = {t: {g: _task_limit([s.checks[g] for s in segments if s.task == t]) for g in gates} for t in tasks}
    cells = {s.key: {g: _cell(s.checks[g], observe[g], s.decision != Verdict.INSUFFICIENT_DATA) for g in gates}
             for s in shown}
    name_w = max([len("segment")] + [len(s.key) for s in shown] + [len(f"threshold {t}") for t in tasks])
    rows_w = max([len("rows")] + [len(f"{s.rows:,}") for s in shown])
    mark_w = {g: max([0] + [len(cells[k][g][1]) for k in cells]) for g in gates}
    gate_w = {g: max([len(title[g])] + [len(cells[k][g][0]) + mark_w[g] for k in cells]
                     + [len(thresholds[t][g]) for t in tasks]) for g in gates}
    failures = {g: sum(s.checks[g].status == Status.FAIL for s in shown) for g in gates}
    kept = _fit(name_w + 2 + rows_w, gate_w, sorted(gates, key=lambda g: -failures[g]), limit)

    def line(name: str, rows: str, values: dict[str, tuple[str, str]], styles: dict[str, str | None]) -> str:
        parts: list[tuple[str | None, str]] = [(None, name.ljust(name_w)), (None, rows.rjust(rows_w))]
        for g in kept:
            figure, mark = values[g]
            room = gate_w[g] - mark_w[g]  # figures right-aligned before the marks' slot
            text = figure.rjust(room) + mark.ljust(mark_w[g]) if len(figure) <= room else figure.rjust(gate_w[g])
            parts.append((styles.get(g), text))
        parts[-1] = (parts[-1][0], parts[-1][1].rstrip())
        return "  ".join(paint(style, text) for style, text in parts).rstrip()

    first, *rest = summary_lines(result, story)
    out = [paint(VERDICT_STYLE.get(result.verdict), ln) for ln in _wrap(first, limit)]
    out += [ln for text in rest for ln in _wrap(text, limit)]
    if not segments:
        return "\n".join(out)
    out += ["", line("segment", "rows", {g: (title[g], "") for g in gates}, {})]
    for route, heading, group in groups:
        unjudged = group[0].decision == Verdict.INSUFFICIENT_DATA
        if unjudged and not show_all:
            heading += ": " + _insufficient_summary(group)
        out += [paint(ROUTE_STYLE.get(route), ln) for ln in _wrap(heading, limit)]
        for s in group if show_all or not unjudged else []:
            styles = {g: ("red" if s.checks[g].blocks else "yellow" if s.checks[g].status == Status.FAIL else None)
                      for g in gates} if not unjudged else {}
            out.append(line(s.key, f"{s.rows:,}", cells[s.key], styles))
    for t in tasks:
        out.append(paint("dim", line(f"threshold {t}", "", {g: (v, "") for g, v in thresholds[t].items()}, {})))
    notes = _own_evidence(story)
    notes += _cell_lines(result)
    hidden = [title[g] for g in gates if g not in kept]
    if hidden:
        notes.append(f"{len(hidden)} gate columns hidden to fit {limit} columns ({', '.join(hidden)}); "
                     "--wide shows them all")
    notes.append("columns: " + "; ".join(f"{title[g]} = {g} ({BY_NAME[g].unit})" for g in kept))
    notes.append(MARKS)
    return "\n".join(out + [ln for text in notes for ln in _wrap(text, limit)])


def _cell_lines(result: Any) -> list[str]:
    """routing.dimensions: per segment whose cells part ways with it, which fail and which keep the edge."""
    if not result.cell_dimensions:
        return []
    dims = ", ".join(result.cell_dimensions)
    out = []
    for key, verdicts in result.cells.items():
        failing = [" · ".join(v.values.values()) for v in verdicts if v.status == CellStatus.FAIL]
        keeping = [" · ".join(v.values.values()) for v in verdicts if v.status == CellStatus.PASS]
        decision = next(s.decision for s in result.segments if s.key == key)
        if failing or (decision == Verdict.ROLLBACK_TO_CLOUD and keeping):
            parts = ([f"fail on their own: {', '.join(failing)}"] if failing else []) + (
                [f"shown within its failing gates: {', '.join(keeping)}"]
                if decision == Verdict.ROLLBACK_TO_CLOUD and keeping else [])
            out.append(f"by {dims} (routing.dimensions): {key}: {'; '.join(parts)}")
    return out


def _wrap(text: str, width: int | None, indent: str = "", first: str | None = None) -> list[str]:
    if width is None:
        return [(first if first is not None else indent) + text]
    return textwrap.wrap(text, width=max(width, 20), initial_indent=first if first is not None else indent,
                         subsequent_indent=indent + "  ", break_on_hyphens=False) or [""]


# ------------------------------------------------------------------ explain

WHY = {Verdict.KEEP_EDGE: "every enforced gate passes",
       Verdict.ROLLBACK_TO_CLOUD: "enforced gates failed: {failed}",
       Verdict.INSUFFICIENT_DATA: "an enforced gate lacks the data it needs"}


def _why(segment: Any) -> str:
    if segment.decision == Verdict.INSUFFICIENT_DATA and segment.needs_rows:
        return f"it needs {segment.needs_rows:,} more rows"
    return WHY[segment.decision].format(failed=", ".join(segment.failed_gates))


def _extra(name: str, value: Any) -> str:
    if value is None:
        return ""
    texts = {
        "max_excess_over_cloud": lambda v: f"may exceed the cloud's by at most {percent(v)}",
        "throttled_share": lambda v: f"throttled on {percent(v)} of requests",
        "max_throttled_share": lambda v: f"throttled share ceiling {percent(v)}",
        "cap_seconds": lambda v: f"cap {v:,.0f} s of edge inference per device-day",
        "edge_adoption": lambda v: f"edge adoption {percent(v)}",
        "cloud_rows": lambda v: f"{v:,} cloud rows",
        "devices_to_detect": lambda v: f"{v:,} edge devices would catch twice the tolerance (80% power, "
                                       "at the alpha this test has now)",
        "more_devices_to_detect": lambda v: f"{v:,} more than now" if v else "",
        "nights_to_detect": lambda v: f"about {v:,} more nights at the current inflow" if v else "",
        "edge_units": lambda v: "",
        "cloud_units": lambda v: "",
        "estimand": lambda v: {"per_device": "each device counts once (a loss of users' adoption)",
                               "capped_requests": "each device's requests count up to a cap",
                               "requests": "each request counts once (a loss of requests)"}.get(v, v),
        "share_over_budget": lambda v: f"{percent(v)} of values above the budget (5% allowed)",
        "cloud_devices": lambda v: f"{v:,} cloud devices",
        "cloud_design_effect": lambda v: f"cloud design effect {v:.2f}",
        "baseline_interval_95": lambda v: f"cloud p95 {interval_text(v, 'ms')}",
        "kill_codes": lambda v: "a kill is " + " or ".join(v),
        "error_device_days": lambda v: "device-days with " + ", ".join(
            f"{code} {percent(x['share'])} ({x['device_days']:,})" for code, x in v.items()) if v else "",
    }
    if name in texts:
        return texts[name](value)
    return f"{name} {value:.3g}" if isinstance(value, float) else f"{name} {value}"


def _check_parts(check: Any) -> list[str]:
    spec = BY_NAME[check.gate]
    measured = "measured -" if check.measured is None else (
        ("p95 " if spec.kind == "p95_budget" or check.gate == GateName.WEAK_NETWORK_LATENCY else "")
        + in_unit(check.measured, spec.unit))
    parts = [measured, interval_text(check.interval, spec.unit, check.interval_alpha) if check.interval_alpha
             else interval_text(check.interval or check.reading_interval, spec.unit)]
    if check.gate != GateName.WEAK_NETWORK_LATENCY:
        parts.append(f"threshold {limit_text(check)}" if check.threshold is not None else "")
    if check.baseline is not None:
        what = "p95" if check.gate == GateName.WEAK_NETWORK_LATENCY else "rate" if spec.kind == "rate" else "adoption"
        parts.append(f"cloud {what} {in_unit(check.baseline, 'ms' if spec.unit == 'ms' else 'share')} "
                     f"(baseline: {check.baseline_level})")
    parts += [test_text(name, t) for name, t in check.tests.items()]
    if check.borderline:
        parts.append("borderline")
    parts += [_extra(k, v) for k, v in check.extra.items()]
    devices = f" from {check.devices:,} devices" if check.devices else ""
    deff = f" (design effect {check.design_effect:.2f})" if check.design_effect else ""
    parts += [check.note, f"{check.rows:,} rows{devices}{deff}, {check.sql}"]
    return [p for p in parts if p]


def test_text(name: str, t: Any) -> str:
    """One test as people read it: what it found, at which level, and how."""
    what = f"{name.replace('_', ' ')} " if name else ""
    p = "p not computed" if t.p_value is None or not math.isfinite(t.p_value) else p_text(t.p_value)
    alpha = f" against alpha {alpha_text(t.alpha)}" if t.alpha is not None else ""
    if t.burden == "prove_safe":
        found = "shown within the threshold" if t.rejected else "not shown within the threshold"
    else:
        found = "evidence the threshold is broken" if t.rejected else "no evidence the threshold is broken"
    return f"{what}{found} ({p}{alpha}; {t.method})"


def explain_view(result: Any, segment: Any, config: Any, width: int | None = None, colour: bool = False) -> str:
    paint = Paint(colour)
    out = [paint(DECISION_STYLE.get(segment.decision), f"release {result.release}, segment {segment.key}: "
                                                       f"{segment.decision.upper()}")]
    out += _wrap(f"{segment.rows:,} edge rows in the window {result.window_start:%Y-%m-%d %H:%M} .. "
                 f"{result.window_end:%Y-%m-%d %H:%M} UTC (minimum {config.min_rows_per_segment:,}); "
                 f"config {result.config_source}", width, "  ")
    out += _wrap(f"decision: {segment.decision} because {_why(segment)}", width, "  ")
    for name, check in segment.checks.items():
        status = check.status.upper() if check.status == Status.FAIL else check.status
        head = f"{BY_NAME[name].label} ({name}, {check.mode}): {status}"
        out.append(paint("red" if check.blocks else None, head))
        out += _wrap("; ".join(_check_parts(check)), width, "    ")
    for scope in _split_scopes(result, segment):
        out.append(paint("red" if scope["flagged"] else None, f"assignment of {scope['scope']} "
                                                              f"({result.assignment.action} when off): "
                                                              f"{'FAIL' if scope['flagged'] else 'pass'}"))
        declared = (f"; expected hold-back share declared by {result.assignment.declared_by}"
                    if result.assignment.declared_by else "")
        out += _wrap(scope["reason"] + declared, width, "    ")
    return "\n".join(out)


def _split_scopes(result: Any, segment: Any) -> list[dict[str, Any]]:
    """The assignment check's scopes that cover a segment: the release's and its task x tier's."""
    if result.assignment is None:
        return []
    return [s.to_dict() for s in result.assignment.scopes
            if s.scope in ("release", f"{segment.task}/{segment.device_tier}")]


def explain_dict(result: Any, segment: Any, config: Any) -> dict[str, Any]:
    """`explain --json`: the segment's figures as the gate has them, plus units and the texts people read."""
    gates = []
    for name, check in segment.checks.items():
        spec = BY_NAME[name]
        gates.append({"gate": name, "label": spec.label, "unit": spec.unit, **check.to_dict(),
                      "measured_text": in_unit(check.measured, spec.unit) if check.measured is not None else None,
                      "threshold_text": limit_text(check) or None, "explanation": "; ".join(_check_parts(check))})
    return {"release": result.release, "segment": segment.key, "task": segment.task,
            "device_tier": segment.device_tier, "network_bucket": segment.network_bucket, "rows": segment.rows,
            "min_rows_per_segment": config.min_rows_per_segment, "decision": segment.decision,
            "why": _why(segment), "needs_rows": segment.needs_rows,
            "window": {"start": result.window_start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "end": result.window_end.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "config": {"path": result.config_source, "digest": result.config_digest}, "snapshot": result.snapshot,
            "gates": gates,
            "assignment": {"unit": result.assignment.unit, "expected_holdback_share": result.assignment.expected,
                           "declared_by": result.assignment.declared_by, "action": result.assignment.action,
                           "scopes": _split_scopes(result, segment)} if result.assignment else None}
