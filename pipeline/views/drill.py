"""`pipeline drill` (and the drill-down part of `pipeline explain`) as text for people."""

from __future__ import annotations

from typing import Any

from pipeline.common.registry import label
from pipeline.common.tables import rows_as
from pipeline.common.units import percent
from pipeline.views.terminal import _wrap, window_text

MAX_CELLS = 8  # cells listed per (segment, gate): those with the most excess; the rest are summed up in a line


def pct(v: float | None) -> str:
    """A share for people; '?' when there is none (a figure too close to 0 to print reads 0%)."""
    return "?" if v is None else percent(0.0 if abs(v) < 1e-9 else v)


def drill_text(result: Any, width: int | None = None, max_cells: int = MAX_CELLS) -> str:
    out = [f"drill-down of release {result.release} by {', '.join(result.by)}; window {window_text(result)}"]
    cells = sum(len(d.cells) for d in result.drills)
    flagged = sum(c.flagged for d in result.drills for c in d.cells)
    out += _wrap(f"flags: a cell that fails on its own; Benjamini-Hochberg over the {cells} cells of this drill, "
                 f"false discovery rate {percent(result.alpha)}: {flagged} flagged", width)
    if not result.drills:
        out.append("nothing to drill: no segment rolls back (choose one with --segment, or --all)")
    elif len(result.drills) > 1:
        out += ["", "answers:"]
        for d in result.drills:
            out += _wrap(d.answer, width, "    ", first=f"  {d.segment} · {label(d.gate)}: ")
    for d in result.drills:
        out += ["", f"{d.segment} · {label(d.gate)} ({d.status or 'not judged'}): {d.what}, threshold "
                    f"{'<=' if d.figure_max else '>='} {percent(d.threshold)}"]
        out += _wrap(d.answer, width, "  ")
        if d.dimensions:
            ranked = "; ".join(f"{x.name} {percent(x.share_of_excess)} in {x.top_value} ({percent(x.share_of_count)} "
                               f"of the count)" for x in d.dimensions)
            out += _wrap(f"dimensions, most telling first: {ranked}", width, "  ")
        quality = any(c.cloud is not None for c in d.cells)
        columns = [" · ".join(d.varying) or "cell", "devices", "count", "figure", "interval"] \
            + (["cloud"] if quality else []) + ["excess share", "flag"]
        rows = []
        for c in d.cells[:max_cells]:
            iv = f"{pct(c.interval[0])} .. {pct(c.interval[1])}" if c.interval else ""
            name = c.label(d.varying) if c.values else f"other ({c.pooled} cells of < {result.min_devices} devices)"
            rows.append((name, c.devices, round(c.n), pct(c.figure), iv)
                        + ((pct(c.cloud),) if quality else ()) + (pct(c.share), "FLAG" if c.flagged else ""))
        table = rows_as("table", columns, rows)
        out += ["  " + line for line in table.splitlines()[:-1]]  # not rows_as' "(N rows)"
        if len(d.cells) > max_cells:
            rest = d.cells[max_cells:]
            out.append(f"  ... {len(rest)} more cells ({sum(c.share for c in rest):.0%} of the excess, "
                       f"{sum(c.flagged for c in rest)} flagged); pipeline drill --json lists them all")
    for s in result.skipped:
        out += _wrap(f"{s['segment']} · {label(s['gate'])}: not split by device ({s['why']})", width)
    return "\n".join(out)


def drill_lines(result: Any, segment: str, width: int | None = None, max_cells: int = 3) -> list[str]:
    """The drill of one segment as wrapped lines, no table (pipeline explain): per gate its answer and its top
    cells."""
    out = _wrap(f"where the failure is (by {', '.join(result.by)}; pipeline drill --release {result.release} "
                f"--segment {segment} lists every cell):", width)
    for d in result.drills:
        out += _wrap(f"{label(d.gate)}: {d.answer}", width, "  ")
        for c in d.cells[:max_cells]:
            if c.share <= 0:
                break
            name = c.label(d.varying) if c.values else "other (small cells)"
            iv = f" ({pct(c.interval[0])} .. {pct(c.interval[1])})" if c.interval else ""
            out += _wrap(f"{name}: {pct(c.figure)}{iv} of {c.n:,.0f} over {c.devices} devices, "
                         f"{pct(c.share)} of the excess{', flagged' if c.flagged else ''}", width, "      ",
                         first="    - ")
    return out
