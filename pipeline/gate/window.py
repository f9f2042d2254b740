"""The gate's window, one definition for every engine and command: whole UTC days.

The window is the `window_days` whole UTC days before the day of its cutoff, where cutoff = as_of -
completeness_lag_hours. The cutoff's own day is left out: it is not over (or its newest hours are held
back), and the rollups the gate reads are kept per day. So a gate run at 14:14 and one at 23:59 judge the
same days, and DuckDB and Spark judge the same rows; today's rows count from tomorrow on.

An intra-day look (`pipeline look`, docs/intraday.md) judges the cutoff's day so far as a stratum of its own:
its day's rollups hold what has landed by the look, and the whole days before it, judged by the nightly, do
not dilute a regression that began today. Nothing it stores is a whole-day evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from pipeline.common.config import Config


@dataclass(frozen=True)
class Window:
    start: datetime  # midnight UTC (naive) of the first day judged
    end: datetime  # midnight UTC of the first day not judged: the cutoff's day
    cutoff: datetime  # as_of - completeness_lag_hours
    partial_day: bool = False  # an intra-day look: [start, end) is the cutoff's day, not over yet

    @property
    def days(self) -> int:
        return 0 if self.partial_day else (self.end - self.start).days

    def params(self, release: str | None = None) -> dict[str, Any]:
        """The bound values every windowed sql/ file reads (days with day >= start and day < end)."""
        out: dict[str, Any] = {"window_start": self.start, "window_end": self.end}
        return {"release": release, **out} if release is not None else out

    def to_dict(self) -> dict[str, Any]:
        if self.partial_day:
            return {"start": _iso(self.start), "end": _iso(self.cutoff), "days": self.days, "whole_days": False,
                    "partial_day": {"start": _iso(self.start), "end": _iso(self.cutoff)}}
        return {"start": _iso(self.start), "end": _iso(self.end), "days": self.days, "whole_days": True,
                "not_yet_judged": {"start": _iso(self.end), "end": _iso(self.cutoff)}}


def gate_window(as_of: datetime, config: Config, intraday: bool = False) -> Window:
    """The whole days before the cutoff's; `intraday`: the cutoff's day so far instead."""
    cutoff = as_of - timedelta(hours=config.completeness_lag_hours)
    end = datetime.combine(cutoff.date(), time())
    if intraday:
        return Window(end, end + timedelta(days=1), cutoff, True)
    return Window(end - timedelta(days=config.window_days), end, cutoff)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
