"""`pipeline compare` as text for people."""

from __future__ import annotations

from typing import Any

from pipeline.common.registry import BY_NAME, GateName, label
from pipeline.common.tables import rows_as
from pipeline.common.units import percent
from pipeline.views.drill import pct
from pipeline.views.terminal import _wrap, window_text


def _p95(v: float | None, gate: str) -> str:
    if v is None:
        return ""
    unit = BY_NAME[gate].unit
    return f"{v:,.0f} ms" if unit == "ms" else f"{v:.1f} °C" if unit == "°C" else percent(v)


def change_text(c: Any) -> str:
    """The change for people: a relative adoption loss, else a difference in percentage points."""
    if c.change is None:
        return "?"
    if c.gate == GateName.QUALITY_LOSS:
        return f"{c.change:.1%} loss"
    return f"{c.change * 100:+.1f} pts"


def compare_text(result: Any, width: int | None = None, show_all: bool = False) -> str:
    out = [f"release {result.release} against {result.against}, edge beside edge"
           + (f" by {', '.join(result.by)}" if result.by else "") + f"; window {window_text(result)}"]
    worse = [c for c in result.comparisons if c.worse]
    out += _wrap(f"worse: the candidate past the previous release by more than the gate's margin; "
                 f"Benjamini-Hochberg over the {len(result.comparisons)} comparisons, false discovery rate "
                 f"{percent(result.alpha)}: {len(worse)} worse", width)
    shown = result.comparisons if show_all else worse
    if not shown:
        out.append(f"no segment is worse on {result.release} than on {result.against}")
        return "\n".join(out)
    columns = ["segment"] + (["cell"] if result.by else []) + ["gate", result.against, result.release, "change",
                                                                 "interval", "p95 before -> after", "worse"]
    rows = []
    for c in shown:
        iv = f"{pct(c.interval[0])} .. {pct(c.interval[1])}" if c.interval else ""
        p95 = f"{_p95(c.previous_p95, c.gate)} -> {_p95(c.candidate_p95, c.gate)}" if c.candidate_p95 else ""
        rows.append((c.segment,) + ((" · ".join(c.cell.values()),) if result.by else ())
                    + (label(c.gate), pct(c.previous), pct(c.candidate), change_text(c), iv, p95,
                       "WORSE" if c.worse else ""))
    out += [""] + rows_as("table", columns, rows).splitlines()[:-1]
    if not show_all:
        out.append(f"{len(result.comparisons) - len(worse)} comparisons not worse (--all lists every one; --json too)")
    return "\n".join(out)
