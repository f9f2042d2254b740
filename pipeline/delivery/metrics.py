"""`pipeline metrics`: the warehouse's state in the Prometheus text exposition format, for node_exporter's
textfile collector (written atomically: a scrape never reads half a file), through prometheus-client.

The dead man's switch is `edge_pipeline_last_success_timestamp_seconds`: a job that dies before its alert step
cannot raise an alert, but a Prometheus rule on `time() - edge_pipeline_last_success_timestamp_seconds > 86400`
fires all the same (README "On call"). The counters sum the manifest (every ingest, nightly or by hand), so
they only grow; the segment and alert gauges are read from the latest evaluations and the alert outbox.
"""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from pipeline.warehouse import sqlfiles

PREFIX = "edge_pipeline"


class _Snapshot:
    """A custom collector over values read once: counters keep their _total names as the format wants."""

    def __init__(self, families: list[Any]):
        self.families = families

    def collect(self) -> list[Any]:
        return self.families


def registry(con: Any) -> CollectorRegistry:
    """The metrics of the warehouse `con` reads."""
    last_success, duration, status = sqlfiles.run(con, "metrics/runs").fetchall()[0]
    reg = CollectorRegistry()
    success = Gauge(f"{PREFIX}_last_success_timestamp_seconds", "Unix time the last successful job run finished "
                    "(0: none yet); alert when it is older than a day", registry=reg)
    success.set(last_success.replace(tzinfo=UTC).timestamp() if last_success else 0)
    Gauge(f"{PREFIX}_last_run_duration_seconds", "How long the last finished job run took",
          registry=reg).set(duration or 0)
    ok = Gauge(f"{PREFIX}_last_run_ok", "1 when the last finished job run succeeded, else 0", registry=reg)
    ok.set(1 if status == "ok" else 0)
    rows_read, accepted, quarantined, duplicates, rejected, loaded = sqlfiles.run(con, "metrics/ingest").fetchall()[0]
    families: list[Any] = []
    for name, doc, value in (("rows_read", "Rows read from landed files", rows_read),
                             ("rows_loaded", "Rows loaded into the warehouse", accepted),
                             ("rows_quarantined", "Rows quarantined with the rules they broke", quarantined),
                             ("rows_duplicated", "Rows counted as duplicates of rows already loaded", duplicates),
                             ("files_rejected", "Files rejected whole (unreadable, wrong schema, ...)", rejected),
                             ("files_loaded", "Files loaded", loaded)):
        families.append(CounterMetricFamily(f"{PREFIX}_{name}", doc, value=float(value)))
    segments = GaugeMetricFamily(f"{PREFIX}_segments", "Segments per decision in each release's latest evaluation",
                                 labels=["release", "decision"])
    for release, decision, n in sqlfiles.run(con, "metrics/segments").fetchall():
        segments.add_metric([release, decision], n)
    alerts = GaugeMetricFamily(f"{PREFIX}_alert_deliveries", "Alerts in the outbox per sink and status "
                               "(delivered, pending, failed)", labels=["sink", "status"])
    for sink, state, n in sqlfiles.run(con, "metrics/alerts").fetchall():
        alerts.add_metric([sink, state], n)
    archived = sqlfiles.run(con, "metrics/archive").fetchall()
    for kind, days, rows, _, _ in archived:  # pipeline/warehouse/archive.py; they only grow
        families.append(CounterMetricFamily(f"{PREFIX}_archived_{kind}_rows", f"Rows of {kind} moved to the archive",
                                            value=float(rows)))
        unit = "release-days" if kind == "events" else "days quarantined on"
        families.append(GaugeMetricFamily(f"{PREFIX}_archived_{kind}_partitions", f"Partitions of {kind} in the "
                                          f"archive ({unit})", value=float(days)))
    warehouse_bytes, archive_bytes = archived[0][3], archived[0][4]
    if warehouse_bytes is not None:  # as the last run that archived measured them
        families.append(GaugeMetricFamily(f"{PREFIX}_warehouse_bytes", "The DuckDB file, its WAL and its snapshots",
                                          value=float(warehouse_bytes)))
    if archive_bytes is not None:  # an archive on local disk
        families.append(GaugeMetricFamily(f"{PREFIX}_archive_bytes", "The archive's Delta tables on local disk",
                                          value=float(archive_bytes)))
    publish_seconds = GaugeMetricFamily(f"{PREFIX}_routing_publish_seconds", "Seconds from a decision being stored "
                                        "to its routing table being readable at the target, for the last "
                                        "successful publish (docs/publishing.md)", labels=["release", "target"])
    publish_failing = GaugeMetricFamily(f"{PREFIX}_routing_publish_failing", "1 when the last publish of the "
                                        "release's routing table to the target failed, else 0",
                                        labels=["release", "target"])
    for release, target, seconds, failing in sqlfiles.run(con, "metrics/publishes").fetchall():
        if seconds is not None:
            publish_seconds.add_metric([release, target], seconds)
        publish_failing.add_metric([release, target], 1 if failing else 0)
    landing_to_route = GaugeMetricFamily(f"{PREFIX}_intraday_landing_to_route_seconds", "Seconds from the oldest "
                                         "file the release's newest state-moving intra-day look read landing to "
                                         "its routing table being published (docs/intraday.md)", labels=["release"])
    for release, seconds in sqlfiles.run(con, "metrics/intraday").fetchall():
        landing_to_route.add_metric([release], seconds)
    reg.register(_Snapshot([*families, segments, alerts, publish_seconds, publish_failing, landing_to_route]))
    return reg


def text(con: Any) -> str:
    return generate_latest(registry(con)).decode()


def write_textfile(con: Any, path: Path) -> None:
    """Atomically, as node_exporter's textfile collector needs (a .prom file in its directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(path), registry(con))
