"""The one clock. Every "now" the pipeline judges by (the future-event rule of
ingestion, the end of the gate's window, the time stamped on what is stored)
is read through `now()`, so a replay gives the same result on any day.

`--as-of T` on a command pins it to T for that command: the demo, a backfill and
a test then do not depend on the wall clock. Without it, production runs read
the wall clock and still reject events from the future. When a run started and
ended (`pipeline runs`, the metrics file), durations and the holder line of a
lock are wall-clock facts and use `wall()`: a backfill with `--as-of` is
recorded as run today, judging an earlier day (the runs table's `as_of`).
"""

from __future__ import annotations

from datetime import UTC, datetime


def wall() -> datetime:
    """The machine's clock as naive UTC, the warehouse's time convention."""
    return datetime.now(UTC).replace(tzinfo=None)


def now(as_of: datetime | None = None) -> datetime:
    """The moment a command judges by: its pinned `--as-of`, else the wall clock."""
    return as_of if as_of is not None else wall()


def parse(text: str, option: str = "--as-of") -> datetime:
    """An ISO date or time; zoned times are converted to UTC, naive ones are UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{option} {text!r} is not an ISO date or time (e.g. 2026-12-02 or 2026-12-02T02:00Z)") \
            from None
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
