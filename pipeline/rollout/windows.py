"""`rollout.windows`: when moves toward the edge (recovery, a suspect segment cleared, a promote) may happen.

A deny window holds them while it lasts (a freeze); when any allow window is listed they happen only inside
one. The gate still judges and alerts in every window, and a rollback never waits. Occurrences are RFC 5545
recurrence rules (python-dateutil's rrule) in the window's own time zone, so "every Friday 18:00 Berlin time"
follows daylight saving; the pipeline's times are naive UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from pipeline.common.config import Rollout, RolloutWindow


def occurrence(window: RolloutWindow, at: datetime) -> tuple[datetime, datetime] | None:
    """The occurrence of `window` that `at` (naive UTC) falls in, as naive UTC (start, end), else None."""
    length = timedelta(hours=window.duration_hours)
    rule = window.rule()
    here = at.replace(tzinfo=UTC).astimezone(ZoneInfo(window.timezone))
    starts = rule.between(here - length, here, inc=True)
    if not starts:
        return None
    start = max(starts).astimezone(UTC).replace(tzinfo=None)
    end = start + length
    return (start, end) if start <= at < end else None


def hold(policy: Rollout, at: datetime) -> str | None:
    """What holds moves toward the edge at `at` (naive UTC), in words; None when nothing does."""
    for window in policy.windows:
        if window.kind == "deny":
            found = occurrence(window, at)
            if found:
                return f"deny window {window.name} until {found[1]:%Y-%m-%d %H:%M} UTC"
    allow = [w for w in policy.windows if w.kind == "allow"]
    if allow and not any(occurrence(w, at) for w in allow):
        return f"outside the allow windows ({', '.join(w.name for w in allow)})"
    return None
