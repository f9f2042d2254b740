"""Alerts: every evaluation raises one, "keep edge" (info) or "roll back to cloud"
(critical, with the failing segments and gates and their numbers; never a
device id). Delivery goes through the `alerts` outbox table, at least once:

- enqueue (with the evaluation, in its transaction): one row per configured sink,
  unless the last alert of the release had the same signature (verdict and
  failing segment/gate pairs) within `alerts.repeat_interval_hours`;
- deliver: every pending row, without holding the database while sending. A
  temporary failure (connection refused, timeout, 5xx, 429) is retried with
  capped exponential backoff and, if it persists, stays pending for the next
  run; a permanent one (other 4xx) is marked failed. The alert id travels as
  `Idempotency-Key`, so a receiver can drop the duplicate of a crash between
  its 200 and our bookkeeping.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from pipeline import db, sqlfiles
from pipeline.config import Config
from pipeline.errors import TransientError
from pipeline.render import fmt_value

MAX_BACKOFF_S = 30.0


class PermanentError(Exception):
    pass


def _signature(result: Any) -> str:
    failing = sorted(f"{s.key}:{g}" for s in result.segments if s.decision == "rollback_to_cloud"
                     for g in s.failed_gates)
    failing += sorted(f"release:{g}" for g, c in result.release_wide.items() if c.blocks)
    return hashlib.sha256(json.dumps([result.verdict, failing]).encode()).hexdigest()[:16]


def build_alert(result: Any) -> dict[str, Any]:
    rolled = [s for s in result.segments if s.decision == "rollback_to_cloud"]
    judged = [s for s in result.segments if s.decision != "insufficient_data"]
    critical = result.verdict in ("rollback_to_cloud", "partial_rollback")
    title = (f"Release {result.release}: ROLL BACK TO CLOUD ({result.verdict})" if critical
             else f"Release {result.release}: keep edge ({result.verdict})")
    lines = [title, f"{len(rolled)} of {len(judged)} judged segments roll back; {result.note}."]
    for g, c in result.release_wide.items():
        if c.blocks:
            lines.append(f"release-wide {g}: {fmt_value(c.measured)} vs threshold {fmt_value(c.threshold)}")
    failing = []
    for s in rolled:
        gates = [{"gate": g, "measured": s.checks[g].measured, "threshold": s.checks[g].threshold}
                 for g in s.failed_gates]
        failing.append({"segment": s.key, "rows": s.rows, "gates": gates})
        shown = ", ".join(f"{x['gate']} {fmt_value(x['measured'])} vs {fmt_value(x['threshold'])}" for x in gates)
        lines.append(f"- {s.key} ({s.rows} rows): {shown}")
    if critical:  # what the rollback costs and how far the launch estimates were off: the ledger and the report
        lines.append(f"ledger: pipeline ledger --release {result.release} (also in pipeline report --release "
                     f"{result.release})")
    alert_id = hashlib.sha256(f"{result.release}|{result.evaluated_at.isoformat()}|{_signature(result)}"
                              .encode()).hexdigest()[:24]
    return {"alert_id": alert_id, "severity": "critical" if critical else "info", "release": result.release,
            "verdict": result.verdict, "signature": _signature(result),
            "evaluated_at": result.evaluated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "title": title, "text": "\n".join(lines), "failing_segments": failing}


def sinks(config: Config) -> list[str]:
    a = config.alerts
    return [name for name, on in (("stdout", a.stdout), ("jsonl", bool(a.jsonl_path)),
                                  ("webhook", bool(a.webhook_url))) if on]


def enqueue(con: Any, alert: dict[str, Any], config: Config, now: datetime) -> bool:
    """Put an alert (from build_alert) in the outbox; False when it repeats the last one too soon."""
    last = sqlfiles.run(con, "alerts/last_alert", {"release": alert["release"]}).fetchone()
    repeat = timedelta(hours=config.alerts.repeat_interval_hours)
    if last and last[0] == alert["signature"] and now - last[1] < repeat:
        return False
    for sink in sinks(config):
        sqlfiles.run(con, "alerts/enqueue", {
            "alert_id": alert["alert_id"], "sink": sink, "release": alert["release"], "verdict": alert["verdict"],
            "signature": alert["signature"], "severity": alert["severity"], "created_at": now,
            "payload": json.dumps(alert)})
    return True


@dataclass
class Delivery:
    delivered: list[str] = field(default_factory=list)  # "alert_id/sink"
    pending: list[str] = field(default_factory=list)  # temporary failures, retried next run
    failed: list[str] = field(default_factory=list)  # permanent failures
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"delivered": len(self.delivered), "pending": len(self.pending), "failed": len(self.failed),
                "errors": self.errors}

    def __str__(self) -> str:
        text = f"alerts: {len(self.delivered)} delivered, {len(self.pending)} pending, {len(self.failed)} failed"
        return text + "".join(f"\n  {e}" for e in self.errors)


def post_webhook(url: str, alert: dict[str, Any], timeout: float, retries: int, backoff: float) -> None:
    """POST with retries of temporary failures; raises TransientError or PermanentError."""
    body = json.dumps(alert).encode()
    delay = backoff
    for attempt in range(retries + 1):
        request = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/json", "Idempotency-Key": alert["alert_id"]})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                response.read()
            return
        except urllib.error.HTTPError as exc:
            if exc.code != 429 and exc.code < 500:
                raise PermanentError(f"webhook answered {exc.code} {exc.reason}") from None
            problem = f"webhook answered {exc.code} {exc.reason}"
            retry_after = exc.headers.get("Retry-After", "") if exc.headers else ""
            if retry_after.isdigit():
                delay = max(delay, float(retry_after))
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            problem = f"webhook unreachable: {reason}"
        if attempt < retries:
            time.sleep(min(delay, MAX_BACKOFF_S))
            delay *= 2
    raise TransientError(f"{problem} (after {retries + 1} attempts)")


def _send(sink: str, alert: dict[str, Any], config: Config, out: TextIO) -> None:
    a = config.alerts
    if sink == "stdout":
        print(alert["text"], file=out)
    elif sink == "jsonl":
        with Path(a.jsonl_path).open("a") as fh:
            fh.write(json.dumps(alert) + "\n")
    elif sink == "webhook":
        post_webhook(a.webhook_url, alert, a.webhook_timeout_s, a.webhook_retries, a.webhook_backoff_s)
    else:
        raise PermanentError(f"unknown sink {sink!r}")


def deliver(db_path: Path, config: Config, out: TextIO | None = None) -> Delivery:
    """Send every pending alert. The database is not held while sending."""
    out = out or sys.stdout
    with db.writer_lock(db_path, "alerts"):
        with db.writing(db_path) as con:
            rows = sqlfiles.run(con, "alerts/pending").fetchall()
        report, marks = Delivery(), []
        for alert_id, sink, payload, _attempts in rows:
            key = f"{alert_id}/{sink}"
            try:
                _send(sink, json.loads(payload), config, out)
                report.delivered.append(key)
                marks.append((alert_id, sink, "delivered", None, db.utcnow()))
            except TransientError as exc:
                report.pending.append(key)
                report.errors.append(f"{sink}: {exc}; kept for the next run")
                marks.append((alert_id, sink, "pending", str(exc), None))
            except (PermanentError, OSError) as exc:
                report.failed.append(key)
                report.errors.append(f"{sink}: {exc}; not retried")
                marks.append((alert_id, sink, "failed", str(exc), None))
        if marks:
            with db.writing(db_path) as con:
                for alert_id, sink, status, error, at in marks:
                    sqlfiles.run(con, "alerts/mark", {"alert_id": alert_id, "sink": sink, "status": status,
                                                      "last_error": error, "delivered_at": at})
    return report
