"""`pipeline schedule`: the nightly job on an APScheduler cron trigger.

- one instance at a time, coalesced; a run missed by less than the misfire
  grace (default 24 h) still runs, once;
- on start, if the last scheduled run (runs table) is older than the trigger's
  last fire time, it runs once to catch up, not once per missed night;
- `<db>.schedule.lock` (an flock) keeps a second scheduler off the database;
  each run takes the writer lock only while it runs, so `pipeline gate`, `sql`
  and `query` keep working between and during runs (see db.py);
- SIGTERM / SIGINT: the running job stops at the next safe point (stopping.py),
  is recorded as interrupted, and the scheduler exits 0;
- `--look-every`: an intra-day look (kind look) on an interval besides; one job runs
  at a time (one worker thread), so a look due during the nightly runs after it.
UTC is the default timezone: APScheduler 3.x has DST bugs with local zones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from pipeline.common import logs, stopping
from pipeline.common.config import Config
from pipeline.common.errors import UsageError
from pipeline.warehouse import db, handle, sqlfiles


def make_trigger(cron: str | None, interval_seconds: float | None, timezone: str) -> Any:
    if interval_seconds:
        return IntervalTrigger(seconds=interval_seconds, timezone=timezone)
    try:
        return CronTrigger.from_crontab(cron or "0 2 * * *", timezone=timezone)
    except (ValueError, KeyError) as exc:
        raise UsageError(f"--cron {cron!r} / --timezone {timezone!r}: {exc}") from None


def last_scheduled_start(db_path: Path) -> datetime | None:
    if not db_path.exists():
        return None
    with handle.Warehouse(db_path, "schedule").reading() as con:  # never waits for a writer's lock
        row = sqlfiles.run(con, "ingest/last_scheduled_run").fetchone()
    return row[0].replace(tzinfo=UTC) if row and row[0] else None


def missed_run(trigger: Any, last_start: datetime | None, now: datetime) -> bool:
    """True when a fire time passed since the last scheduled run started."""
    if last_start is None or isinstance(trigger, IntervalTrigger):
        return False
    next_after_last = trigger.get_next_fire_time(None, last_start + timedelta(seconds=1))
    return next_after_last is not None and next_after_last <= now


def run_scheduler(db_path: Path, landing: Path, config: Config, trigger: Any, misfire_grace_s: float,
                  job: Callable[..., Any], look_every_s: float | None = None) -> str:
    """Blocks until SIGTERM/SIGINT; returns why it stopped."""
    db.require_folder(db_path)
    with db.holder_lock(Path(f"{db_path}.schedule.lock"), f"schedule --landing {landing}",
                        f"database {db_path} already has a scheduler"):
        stop = threading.Event()
        stopping.reset()
        stopping.install(stop)
        scheduler = BackgroundScheduler(timezone=UTC, executors={"default": ThreadPoolExecutor(1)})

        def guarded(*kind: str) -> None:
            if stopping.stop_requested():
                return
            try:
                job(*kind)
            except stopping.Interrupted:
                pass
            except Exception as exc:  # a failed run is recorded in runs; the scheduler goes on
                logs.event("schedule", step="run_failed", error=f"{type(exc).__name__}: {exc}")

        scheduler.add_job(guarded, trigger, id="nightly", max_instances=1, coalesce=True,
                          misfire_grace_time=int(misfire_grace_s) or None)
        if look_every_s:
            scheduler.add_job(guarded, IntervalTrigger(seconds=look_every_s, timezone=UTC), args=("look",),
                              id="look", max_instances=1, coalesce=True, misfire_grace_time=int(look_every_s))
        now = datetime.now(UTC)
        catch_up = missed_run(trigger, last_scheduled_start(db_path), now)
        if catch_up:
            scheduler.add_job(guarded, id="catch_up", max_instances=1, next_run_time=now)
        scheduler.start()
        logs.event("schedule", step="start", next_run=str(scheduler.get_job("nightly").next_run_time),
                   catch_up=catch_up)
        # Not one wait without a timeout: the kernel may hand SIGTERM to any thread, and Python runs the
        # handler (which sets `stop`) only when the main thread next runs bytecode.
        while not stop.wait(timeout=0.5):
            pass
        logs.event("schedule", step="stopping")
        scheduler.shutdown(wait=True)  # the running job stops at its next safe point
        return "stopped by a signal"
