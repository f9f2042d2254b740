"""Data-quality alarms of the nightly job. A run that ends "ok" can still have found
nothing usable; the person on call hears of it through a `data_quality` alert (the
same outbox and sinks as the gate's alerts) and the nightly exit code 4 when the run:

- rejected files (unreadable, not Parquet, a required column missing or uncastable);
- quarantined more than `alerts.max_quarantined_share` of the rows it read;
- left files in the landing folder that are not Parquet (never read: CSV, JSON, ...);
- loaded no new file while the newest one is older than `alerts.max_days_without_data`;
- follows a run that was aborted (its process died without finishing: pipeline/warehouse/runs.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.common.config import Config
from pipeline.common.tables import counted
from pipeline.ingest.landing import shown
from pipeline.warehouse import sqlfiles

ALL_RELEASES = "*"  # the alerts table's release for an alert about the data, not one release


def convert_hint(path: str | Path) -> str:
    """How to turn a CSV (or JSON) file into the Parquet the pipeline reads, as one shell line (`path` may be
    an s3:// URI: kept as it is)."""
    text = str(path)
    stem, suffix = os.path.splitext(text)
    reader = "read_json_auto" if suffix.lower() in (".json", ".jsonl", ".ndjson") else "read_csv_auto"
    return f"duckdb -c \"COPY (FROM {reader}('{text}')) TO '{stem}.parquet' (FORMAT parquet)\""


def non_parquet_files(landing: Path) -> list[Path]:
    """Files under the landing folder that ingestion never reads: not *.parquet and not hidden."""
    return sorted(p for p in landing.rglob("*") if p.is_file() and p.suffix != ".parquet"
                  and not any(part.startswith(".") for part in p.relative_to(landing).parts))


def batch_problems(ingested: dict[str, Any], config: Config, now: datetime) -> list[dict[str, Any]]:
    """What is wrong with the files one ingest read: files rejected, too many rows quarantined. `pipeline ingest`
    exits 4 on these, as `nightly` does."""
    a = config.alerts
    found = []
    rejected = ingested["rejected_files"]
    if rejected:
        first = rejected[0]
        more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
        found.append({"kind": "rejected_files", "key": sorted(r["path"] for r in rejected),
                      "text": f"{len(rejected)} of {counted(ingested['files'], 'file')} rejected: "
                              f"{shown(first['path'])}: {shown(first['reason'])}{more}"})
    read, quarantined = ingested["rows_read"], ingested["quarantined"]
    if read and quarantined / read > a.max_quarantined_share:
        found.append({"kind": "quarantined_share", "key": [now.isoformat()],
                      "text": f"{quarantined:,} of {read:,} rows read were quarantined ({quarantined / read:.1%}, "
                              f"above alerts.max_quarantined_share {a.max_quarantined_share:.0%}); "
                              "see pipeline query quarantine_reasons"})
    return found


def problems(con: Any, landing: Path | str, ingested: dict[str, Any], config: Config,
             now: datetime) -> list[dict[str, Any]]:
    """What is wrong with the data of one run (ingested: IngestResult.to_dict()); [] when nothing is.
    Each problem: kind, a one-line text, and the key that tells one occurrence from another."""
    a = config.alerts
    found = batch_problems(ingested, config, now)
    if isinstance(landing, Path):
        others = [str(p) for p in non_parquet_files(landing)]
        count = len(others)
    else:  # an s3:// landing: what this run's listing found (its examples, and how many)
        others = [key for s in ingested.get("sources", []) for key in s["not_parquet_examples"]]
        count = sum(s["not_parquet"] for s in ingested.get("sources", []))
    if count:
        found.append({"kind": "not_parquet", "key": others,
                      "text": f"{counted(count, 'file')} in {landing} are not Parquet and were not read "
                              f"(e.g. {Path(others[0]).name}); convert them: {convert_hint(others[0])}"})
    aborted = sqlfiles.run(con, "ingest/aborted_runs").fetchall()
    if aborted:
        run_id, kind, started, error = aborted[-1]
        more = f" (and {len(aborted) - 1} earlier)" if len(aborted) > 1 else ""
        found.append({"kind": "aborted_run", "key": [r[0] for r in aborted],
                      "text": f"a previous run was aborted: run {run_id} ({kind}, started {started:%Y-%m-%d %H:%M} "
                              f"UTC){more}: {error.removeprefix('aborted: ')}"})
    if not ingested["loaded_files"]:
        last = sqlfiles.run(con, "ingest/last_loaded_file").fetchone()[0]
        if last is None:
            found.append({"kind": "no_new_data", "key": [],
                          "text": f"no telemetry file has ever loaded (landing folder {landing})"})
        elif now - last > timedelta(days=a.max_days_without_data):
            days = (now - last) / timedelta(days=1)
            found.append({"kind": "no_new_data", "key": [],
                          "text": f"no new file for {days:.1f} days (newest loaded {last:%Y-%m-%d %H:%M} UTC; "
                                  f"alerts.max_days_without_data is {a.max_days_without_data:g}) in {landing}"})
    return found


def build_alert(found: list[dict[str, Any]], run_id: int, now: datetime) -> dict[str, Any]:
    """The alert (the shape alerts.enqueue takes) for the problems of one run."""
    signature = hashlib.sha256(json.dumps(sorted([p["kind"], p["key"]] for p in found)).encode()).hexdigest()[:16]
    title = f"Data quality: {len(found)} problem{'s' if len(found) != 1 else ''} in nightly run {run_id}"
    return {"alert_id": hashlib.sha256(f"data_quality|{run_id}|{signature}".encode()).hexdigest()[:24],
            "severity": "warning", "release": ALL_RELEASES, "verdict": "data_quality", "signature": signature,
            "evaluated_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "title": title, "run_id": run_id,
            "problems": [{"kind": p["kind"], "text": p["text"]} for p in found],
            "text": "\n".join([title] + [f"- {p['text']}" for p in found])}
