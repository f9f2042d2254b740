"""The nightly job: ingest what landed, refresh the rollup, judge every active
release, write routing tables, and record the run. Gate verdicts are results,
not failures: the job fails only when one of its steps does. Data that looks
wrong (files rejected, rows quarantined, nothing new) is neither: it raises a
data_quality alert and `pipeline nightly` exits 4 (pipeline/ingest/data_quality.py).

An intra-day look (`pipeline look`, `pipeline schedule --look-every`; docs/intraday.md) is the same run with
the day so far judged beside the whole days: it ingests what landed since, refreshes the days that changed,
judges, stores each release's look (a failing segment moves toward the cloud, a pass moves nothing) and
publishes the routes it moved. The data-quality check, the reports and the archive stay the nightly's."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import duckdb

from pipeline.common import clock, logs, stopping
from pipeline.common.config import Config
from pipeline.common.errors import TransientError
from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.common.stopping import Interrupted
from pipeline.common.tables import counted
from pipeline.delivery.alerts import deliver, enqueue, sent_recently
from pipeline.gate.result import GateResult
from pipeline.gate.window import gate_window
from pipeline.ingest import data_quality
from pipeline.ingest.isolated import ReaderLimits
from pipeline.ingest.landing import shown
from pipeline.ingest.run import DEFAULT_BATCH_ROWS, ingest
from pipeline.jobs.judge import Judgement, judge
from pipeline.rollout.history import INTRADAY
from pipeline.warehouse import db, runs, sqlfiles
from pipeline.warehouse.aggregate import refresh, use_settings
from pipeline.warehouse.archive import age_out
from pipeline.warehouse.handle import Warehouse


@dataclass
class RunResult:
    run_id: int
    status: str = "running"
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    data_quality: list[str] = field(default_factory=list)  # problems with the data (data_quality.py), exit 4
    job: str = "nightly"  # or look: the name its log lines carry

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "run_id": self.run_id,
                "status": self.status, "steps": self.steps, "verdicts": self.verdicts,
                "error": self.error, "data_quality": self.data_quality}

    def __str__(self) -> str:
        lines = [f"run {self.run_id}: {self.status}"]
        for name, step in self.steps.items():
            lines.append(f"  {name:<10} {step.get('text', '')}".rstrip())
        for release, verdict in self.verdicts.items():
            lines.append(f"  release {release}: {verdict}")
        for problem in self.data_quality:
            lines.append(f"  DATA QUALITY: {problem}")
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)


def _step(run: RunResult, name: str, started: float, text: str, **counts: Any) -> None:
    run.steps[name] = {"seconds": round(time.perf_counter() - started, 3), **counts, "text": text}
    logs.event(run.job, **{"step": name, "run": run.run_id, **counts, "seconds": run.steps[name]["seconds"]})


def _check_data(run: RunResult, wh: Warehouse, landing: Path | str, ingested: dict[str, Any], config: Config,
                now: datetime) -> None:
    """Raise a data_quality alert (into the outbox, delivered with the gate's) when the data looks wrong."""
    t = time.perf_counter()
    with wh.writing() as con:
        found = data_quality.problems(con, landing, ingested, config, now)
        alert = data_quality.build_alert(found, run.run_id, now) if found else None
        if alert and not sent_recently(con, alert["release"], alert["signature"], config, now):
            enqueue(con, alert, config, now)
    run.data_quality = [p["text"] for p in found]
    _step(run, "quality", t, f"{len(found)} data-quality problems" if found else "no data-quality problem",
          problems=len(found))


def run_nightly(db_path: Path, landing: Path | str, config: Config, as_of: datetime | None = None,
                routing_dir: Path | None = None, kind: str = "nightly", alert_out: TextIO | None = None,
                batch_rows: int = DEFAULT_BATCH_ROWS, reader: ReaderLimits | None = None,
                report_dir: Path | None = None, engine: Any = None,
                relist: bool = False, intraday: bool = False) -> tuple[RunResult, list[GateResult]]:
    """`engine`: None for DuckDB, else a SparkEngine (pipeline/warehouse/spark/engine.py): events, rollups and
    the gate's SQL on Spark; the run, the manifest, evaluations, rollout state and alerts in the DuckDB file
    either way. One warehouse handle for the whole run (pipeline/warehouse/handle.py): every step gets it."""
    # one moment the run judges by (ingest's future-event rule, the window, what it stores); the run's own start
    # and end are wall-clock facts, so `runs` and the metrics tell when it really ran and for how long
    as_of = now = clock.now(as_of)
    results: list[GateResult] = []
    with Warehouse(db_path, kind) as wh:
        with wh.writing() as con:  # opening it marks the runs whose process died (pipeline/warehouse/runs.py)
            run = RunResult(sqlfiles.run(con, "ingest/start_run", {"kind": kind, "started_at": clock.wall(),
                                                                   "as_of": as_of, **runs.identity()}).fetchone()[0],
                            job="look" if intraday else "nightly")
        try:
            t = time.perf_counter()
            if engine is not None:
                from pipeline.ingest.spark import ingest_spark

                ingested = ingest_spark(wh, engine, [landing], now=now)
            else:
                ingested = ingest(wh, [landing], now=now, batch_rows=batch_rows, reader=reader, landing=config.landing,
                                  relist=relist)
            d = ingested.to_dict()
            _step(run, "ingest", t, f"{counted(d['loaded_files'], 'file')} loaded, "
                  f"{len(d['rejected_files'])} rejected, {len(d['skipped_files'])} already in; "
                  f"{d['accepted']} rows accepted, {d['quarantined']} quarantined, {d['duplicates']} duplicates",
                  **{k: v for k, v in d.items() if k != "per_file"})
            for status in ("rejected", "refused", "vanished"):
                for f in d.get(f"{status}_files", []):
                    line = f"{status:<8} {shown(f['path'])}: {shown(f['reason'])}"
                    run.steps["ingest"]["text"] += f"\n             {line}"
            for listing in ingested.sources:
                run.steps["ingest"]["text"] += f"\n             {listing}"
            if not intraday:
                _check_data(run, wh, landing, d, config, now)
            stopping.check()  # a stop asked for during a step takes effect before the next one
            t = time.perf_counter()
            if engine is not None:
                from pipeline.warehouse.spark.aggregate import refresh_spark

                rolled = refresh_spark(wh, engine, config, now=now)
            else:
                rolled = refresh(wh, config, now=now, batch=intraday)
            _step(run, "aggregate", t, str(rolled), **rolled.to_dict())
            stopping.check()
            t = time.perf_counter()
            window = gate_window(as_of, config, intraday).params()
            judged = judge(wh, partial(_reading, wh, config, engine),
                           lambda source: _in_version_order(sqlfiles.run(source, "gate/active_releases",
                                                                         window).fetchall()),
                           config, as_of=as_of, now=now, trigger=INTRADAY if intraday else "nightly",
                           routing_out=(lambda release: routing_dir / f"routing-{release}.json") if routing_dir
                           else None, publishing=True, intraday=intraday)
            results = [j.result for j in judged]
            run.verdicts.update((r.release, r.verdict) for r in results)
            _step(run, "gate", t, f"{counted(len(results), 'release')} judged", releases=len(results))
            if intraday:
                _record_landed(wh, judged, d["per_file"])
            for j in judged:
                if intraday and j.recorded and j.recorded.moved:
                    run.steps["gate"]["text"] += f"\n             release {j.result.release}: {moved_by(j, as_of)}"
            published = [p for j in judged for p in j.published]
            if config.publish.targets:
                outcomes = {o: sum(p.outcome == o for p in published) for o in ("published", "unchanged", "failed")}
                run.steps["gate"]["text"] += "; routing " + ", ".join(f"{n} {o}" for o, n in outcomes.items())
                run.steps["gate"]["publish"] = [p.to_dict() for p in published]
                for p in published:
                    if p.outcome != "unchanged":
                        run.steps["gate"]["text"] += f"\n             {p}"
            unpublished = [p for p in published if p.outcome == "failed"]
            if report_dir:
                from pipeline.views.report import write_reports  # Altair: only when reports are asked for

                t = time.perf_counter()
                with wh.reading() as con:
                    use_settings(con, config)
                    index = write_reports(con, results, config, report_dir, [j.story for j in judged])
                _step(run, "report", t, f"{counted(len(results), 'report')}, index {index}", reports=len(results))
            stopping.check()
            if not intraday:
                t = time.perf_counter()
                if engine is None:
                    aged = age_out(wh, config, now=now)
                else:
                    from pipeline.warehouse.spark.archive import age_out_spark

                    aged = age_out_spark(wh, engine.warehouse, config, now=now)
                counts = {k: v for k, v in aged.to_dict().items() if k not in ("moved", "schema_version")}
                _step(run, "archive", t, str(aged).removeprefix("archive: "), **counts)
            wh.let_go()  # a slow webhook must not stall other writers: deliver() takes the lock only to read/mark
            t = time.perf_counter()
            delivery = deliver(wh, config, out=alert_out)
            _step(run, "alerts", t, str(delivery).removeprefix("alerts: "), **delivery.to_dict())
            if delivery.pending:
                raise TransientError(f"{len(delivery.pending)} alerts could not be delivered; "
                                     "they stay in the outbox for the next run")
            if unpublished:  # the decision is stored: the next run publishes it
                raise TransientError(f"routing not published: {'; '.join(p.error for p in unpublished)}")
            unsynced = [x for x in delivery.synced if x.error]
            if unsynced:  # as a webhook that stays down: the run failed, and the next one posts the whole state
                raise TransientError("Alertmanager not kept in step: " + "; ".join(str(x) for x in unsynced))
            run.status = "ok"
        except (Interrupted, KeyboardInterrupt) as exc:
            run.status, run.error = "interrupted", str(exc) or "stopped by a second signal"
            raise
        except Exception as exc:
            if stopping.stop_requested():  # a second signal inside DuckDB surfaces as "Query interrupted"
                run.status, run.error = "interrupted", "stopped by a second signal"
                raise Interrupted(run.error) from exc
            run.status, run.error = "failed", db.storage_failure(wh.path, exc) or f"{type(exc).__name__}: {exc}"
        finally:
            logs.event(run.job, step="end", run=run.run_id, status=run.status, error=run.error or "")
            summary = {k: {kk: vv for kk, vv in v.items() if kk != "text"} for k, v in run.steps.items()}
            with wh.writing() as con:
                sqlfiles.run(con, "ingest/finish_run", {
                    "run_id": run.run_id, "finished_at": clock.wall(), "status": run.status,
                    "summary": json.dumps({"steps": summary, "verdicts": run.verdicts,
                                           "data_quality": run.data_quality}, default=str),
                    "error": run.error})
            if config.metrics.textfile:  # a failed run writes them too: its last success stays where it was
                _write_metrics(wh, Path(config.metrics.textfile))
    return run, results


def _record_landed(wh: Warehouse, judged: list[Judgement], files: list[dict[str, Any]]) -> None:
    """Each stored look's `landed_from`: when the oldest file this run loaded had landed (the start of the
    time to the published route: `pipeline state`, the metrics)."""
    landed = [f["landed_at"] for f in files if f["status"] == "loaded" and f.get("landed_at")]
    stored = [j.recorded.evaluation_uid for j in judged if j.recorded]
    if not landed or not stored:
        return
    oldest = datetime.strptime(min(landed), "%Y-%m-%dT%H:%M:%SZ")
    with wh.writing() as con:
        for uid in stored:
            sqlfiles.run(con, "rollout/intraday_landed", {"look_uid": uid, "landed_from": oldest})


def moved_by(judged: Judgement, as_of: datetime) -> str:
    """The states an intra-day look moved, by where they went: "rolled_back: intent/low/normal, ..."."""
    went: dict[str, list[str]] = {}
    for key in sorted(judged.recorded.moved):
        went.setdefault(judged.states[key].state, []).append(key)
    return "; ".join(f"{state}: {', '.join(keys)}" for state, keys in went.items()) + \
        f" (intra-day look at {as_of:%Y-%m-%d %H:%M} UTC)"


@contextmanager
def _reading(wh: Warehouse, config: Config, engine: Any) -> Iterator[Any]:
    """Where the gate reads: the Spark engine, or the warehouse with the config's settings."""
    if engine is not None:
        yield engine
        return
    with wh.reading() as con:
        use_settings(con, config)
        yield con


def _in_version_order(rows: list[tuple]) -> list[str]:
    """4.9 before 4.10: a release is judged after the one before it (routing.previous_edge reads its states)."""
    from pipeline.rollout.previous import version_key

    return sorted((r[0] for r in rows), key=version_key)


def _write_metrics(wh: Warehouse, path: Path) -> None:
    from pipeline.delivery.metrics import write_textfile  # prometheus-client: only when metrics are asked for

    try:
        with wh.reading() as con:
            write_textfile(con, path)
    except (OSError, duckdb.Error) as exc:  # the run's outcome stands; the stale file's timestamp tells
        logs.event("nightly", step="metrics", error=f"{path}: {exc}")
