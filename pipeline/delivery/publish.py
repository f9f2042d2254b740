"""Publishing the routing table where the apps read it (gates/admission.yaml `publish.targets`, docs/publishing.md).

An `s3` target holds one object per release, `<prefix>routing-<release>.json`, in a versioned bucket: the routing
table (pipeline/rollout/routing.py) with the `evaluation_uid` it comes from and its `content_sha256` (of the
table's canonical JSON), served with the target's Cache-Control. The same decision gives the same bytes.

- **Two writers never overwrite each other unseen.** Each write is conditional: If-Match on the ETag this
  warehouse last wrote there, If-None-Match: * for the first. A refusal (412) is a Conflict naming the version
  that is there now; nothing is overwritten. `pipeline routing publish --replace VERSION` takes over a version
  someone else wrote, once a person has looked at it.
- **Nothing decided is lost.** What to publish is derived from what is stored: per release, the table of the
  newest stored evaluation and the rollout states now. A decision whose hash differs from the last decision
  published to a target is published by the next run that publishes (nightly, gate --routing-out, `pipeline
  routing publish`), so a run killed between deciding and publishing is made good by the next one. A failed
  publish is recorded, raises an alert into the outbox, and fails the command.
- **Rollback** re-publishes an earlier version's bytes (read by VersionId, checked against the hash recorded
  when it was published) with a reason on record. It stands until the next decision differs from the one last
  published.
- A `flagd` target is a flagd flag file (pipeline/delivery/openfeature.py), one flag per release, written
  whole and atomically; it keeps no versions (a rollback is an s3 target's).
- **Measured**: each publish records the seconds from the decision being stored (the evaluation's or the
  action's `stored_at`) to the object being readable (a HEAD returning the ETag written); `pipeline state`, the
  metrics and the report show the last one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from pipeline.common import clock
from pipeline.common.config import BUCKET_KINDS, Config, PublishTarget
from pipeline.common.errors import BucketError, UsageError
from pipeline.common.units import seconds_text
from pipeline.delivery.openfeature import write_flagd
from pipeline.ingest.object_store import Conflict, Store, parse_uri
from pipeline.ingest.stores import open_store
from pipeline.warehouse import db, sqlfiles
from pipeline.warehouse.handle import Warehouse

CONTENT_TYPE = "application/json"
DECISION, ROLLBACK, TAKEOVER = "decision", "rollback", "takeover"  # routing_publishes.kind


@dataclass(frozen=True)
class Decision:
    """A routing table to publish and where it comes from."""

    table: dict[str, Any]
    evaluation_uid: str
    decided_at: datetime  # when the decision was stored (wall clock, UTC)
    result: dict[str, Any] | None = None  # the stored gate result it comes from, when read back

    @property
    def release(self) -> str:
        return str(self.table["release"])

    @cached_property  # read several times a publish (metadata, the conflict check, the record): hashed once
    def sha256(self) -> str:
        return hashlib.sha256(_canonical(self.table)).hexdigest()

    @cached_property
    def body(self) -> bytes:
        doc = {**self.table, "evaluation_uid": self.evaluation_uid, "content_sha256": self.sha256}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def _canonical(table: dict[str, Any]) -> bytes:
    return json.dumps(table, sort_keys=True, separators=(",", ":"), default=str).encode()


@dataclass
class Published:
    target: str
    release: str
    outcome: str  # published | unchanged | failed
    uri: str
    version_id: str | None = None
    seconds: float | None = None  # from the decision stored to the object readable
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "release": self.release, "outcome": self.outcome, "uri": self.uri,
                "version_id": self.version_id, "seconds": self.seconds, "error": self.error}

    def __str__(self) -> str:
        if self.outcome == "failed":
            return f"routing {self.release} -> {self.target}: NOT PUBLISHED: {self.error}"
        version = f"version {self.version_id}" if self.version_id else ""
        if self.outcome == "unchanged":
            return f"routing {self.release} -> {self.uri}: already published" + (f" ({version})" if version else "")
        return (f"routing {self.release} -> {self.uri}: published{', ' + version if version else ''}, "
                f"{seconds_text(self.seconds)} after the decision")


def key_of(target: PublishTarget, release: str) -> str:
    prefix = parse_uri(target.uri).prefix
    return f"{prefix}{'/' if prefix and not prefix.endswith('/') else ''}routing-{release}.json"


def store_of(target: PublishTarget, config: Config) -> Store:
    return open_store(parse_uri(target.uri), target.endpoint_url, target.region, config.publish.retry_seconds,
                      fetchers=1, retry_setting="publish.retry_seconds")


def target_named(config: Config, name: str | None) -> list[PublishTarget]:
    targets = list(config.publish.targets)
    if not targets:
        raise UsageError(f"{config.source}: no publish.targets configured (docs/publishing.md)")
    if name is None:
        return targets
    chosen = [t for t in targets if t.label == name]
    if not chosen:
        raise UsageError(f"no publish target named {name!r}; configured: {', '.join(t.label for t in targets)}")
    return chosen


def _versioned_targets(config: Config, name: str | None) -> list[PublishTarget]:
    """The targets that keep versions (buckets) among those `name` picks; naming one that keeps none is a usage
    error."""
    chosen = target_named(config, name)
    other = [t for t in chosen if t.kind not in BUCKET_KINDS]
    if name is not None and other:
        raise UsageError(f"publish target {other[0].label!r} ({other[0].kind}) keeps no versions; its writes are "
                         "rows of routing_publishes, and a bucket target's versions are what rollback goes back to "
                         "(docs/publishing.md)")
    return [t for t in chosen if t.kind in BUCKET_KINDS]


def stored_decision(con: Any, release: str, config: Config, now: datetime) -> Decision | None:
    """The routing table of `release`'s newest stored evaluation with the rollout states at `now` (the people's
    actions in force then included); None when the release was never judged."""
    from pipeline.rollout import state as rollout_state
    from pipeline.rollout.actions import recorded
    from pipeline.rollout.previous import find
    from pipeline.rollout.routing import routing_table

    row = sqlfiles.run(con, "publish/decision", {"release": release}).fetchone()
    if row is None:
        return None
    result, uid, decided_at = json.loads(row[0]), row[1], row[2]
    states = rollout_state.current(con, release, config, now, recorded(con, release))
    return Decision(routing_table(result, config, states, find(con, release, config)), uid, decided_at, result)


def publish(wh: Warehouse, config: Config, decisions: list[Decision], *, target: str | None = None,
            kind: str = DECISION, reason: str = "", actor: str = "", replace: str | None = None,
            force: bool = False) -> list[Published]:
    """Each decision to each target (module docstring); `force`: written even when it is the last one
    published. Failures are recorded and raise one alert into the outbox; they are returned, never raised."""
    out = []
    for t in target_named(config, target) if target else config.publish.targets:
        for decision in decisions:
            out.append(_publish_one(wh, config, t, decision, kind, reason, actor, replace, force))
    failed = [p for p in out if p.outcome == "failed"]
    if failed:
        _alert(wh, config, failed)
    return out


def _publish_one(wh: Warehouse, config: Config, target: PublishTarget, decision: Decision, kind: str, reason: str,
                 actor: str, replace: str | None, force: bool) -> Published:
    release = decision.release
    uri = where(target, release)
    with db.reading(wh.path) as con:
        last = sqlfiles.run(con, "publish/last", {"target": target.label, "release": release}).fetchone()
    last_sha, last_etag, last_version = (last[0], last[1], last[2]) if last else (None, None, None)
    if kind == DECISION and not force and last_sha == decision.sha256:
        return Published(target.label, release, "unchanged", uri, last_version)
    try:
        if target.kind == "flagd":
            write_flagd(Path(target.path), decision.table, decision.sha256, decision.evaluation_uid)
            etag, version = decision.sha256, None
        else:
            etag, version, kind = _put_object(config, target, decision, kind, last_etag, replace)
    except (BucketError, UsageError, OSError) as exc:
        error = f"{target.path}: {exc.strerror}" if isinstance(exc, OSError) and exc.strerror else str(exc)
        _record(wh, target, decision, kind, reason, actor, "failed", None, None, None, error)
        return Published(target.label, release, "failed", uri, error=error)
    seconds = max(0.0, (db.utcnow() - decision.decided_at).total_seconds())
    _record(wh, target, decision, kind, reason, actor, "published", etag, version, seconds, None)
    return Published(target.label, release, "published", uri, version, round(seconds, 3))


def where(target: PublishTarget, release: str) -> str:
    """The object or file a target keeps `release`'s table in."""
    return target.path if target.kind == "flagd" else parse_uri(target.uri).of(key_of(target, release))


def _put_object(config: Config, target: PublishTarget, decision: Decision, kind: str, last_etag: str | None,
            replace: str | None) -> tuple[str, str | None, str]:
    """The conditional write of the module docstring, read back; (ETag, VersionId, kind) of what was written."""
    store, key = store_of(target, config), key_of(target, decision.release)
    uri = parse_uri(target.uri).of(key)
    if replace:
        there = store.head(key)
        if there is None or there.get("VersionId") != replace:
            raise BucketError(f"{uri}: version {replace} is not the current one "
                              f"({there.get('VersionId') if there else 'no object'}); nothing replaced")
        last_etag, kind = str(there["ETag"]), TAKEOVER
    metadata = {"sha256": decision.sha256, "release": decision.release, "evaluation-uid": decision.evaluation_uid,
                "kind": kind}
    try:
        written = store.put(key, decision.body, if_match=last_etag, cache_control=target.cache_control,
                            content_type=CONTENT_TYPE, metadata=metadata)
        etag, version = written.etag, written.version_id
    except Conflict as conflict:
        now_there = conflict.now or {}
        if now_there.get("Metadata", {}).get("sha256") != decision.sha256:
            raise BucketError(_conflict_text(uri, now_there, decision.release)) from None
        etag, version = str(now_there["ETag"]), now_there.get("VersionId")  # our own write, answered late
    readable = store.head(key)
    if readable is None or readable.get("ETag") != etag:
        raise BucketError(f"{uri}: written (ETag {etag}) but read back as "
                          f"{readable.get('ETag') if readable else 'missing'}: another writer is at work")
    return etag, version, kind


def _conflict_text(uri: str, there: dict[str, Any], release: str) -> str:
    if not there:
        return f"{uri}: not published: the object this warehouse last wrote is gone; nothing overwritten"
    when = there.get("LastModified")
    return (f"{uri}: not published: another writer changed it since this warehouse's last write (version "
            f"{there.get('VersionId')}, written {when:%Y-%m-%d %H:%M:%S} UTC); nothing overwritten. See `pipeline "
            f"routing history --release {release}`; `pipeline routing publish --release {release} --replace "
            f"{there.get('VersionId')}` writes over it")


def _record(wh: Warehouse, target: PublishTarget, decision: Decision, kind: str, reason: str, actor: str,
            status: str, etag: str | None, version: str | None, seconds: float | None, error: str | None) -> None:
    with wh.writing() as con:
        sqlfiles.run(con, "publish/record", {
            "target": target.label, "release": decision.release, "sha256": decision.sha256,
            "evaluation_uid": decision.evaluation_uid, "kind": kind, "reason": reason, "actor": actor,
            "decided_at": decision.decided_at, "published_at": db.utcnow(), "seconds": seconds, "status": status,
            "etag": etag, "version_id": version, "error": error})


def _alert(wh: Warehouse, config: Config, failed: list[Published]) -> None:
    from pipeline.delivery.alerts import enqueue

    now = clock.now(None)
    text = "\n".join([f"Routing not published to {len(failed)} target(s): the phones keep the previous routes"]
                     + [f"- {p}" for p in failed])
    signature = hashlib.sha256(text.encode()).hexdigest()[:16]
    alert = {"alert_id": hashlib.sha256(f"publish|{now.isoformat()}|{signature}".encode()).hexdigest()[:24],
             "severity": "critical", "release": failed[0].release if len({p.release for p in failed}) == 1 else "*",
             "verdict": "publish_failed", "signature": signature, "evaluated_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
             "title": text.splitlines()[0], "text": text}
    with wh.writing() as con:
        enqueue(con, alert, config, now)


def rollback(wh: Warehouse, config: Config, release: str, version_id: str, reason: str, actor: str,
             target: str | None = None) -> list[Published]:
    """Re-publish the bytes `version_id` held (each target that has it), with `reason` on record."""
    out = []
    for t in _versioned_targets(config, target):
        store, key = store_of(t, config), key_of(t, release)
        uri = parse_uri(t.uri).of(key)
        if not store.versioned():
            raise UsageError(f"{uri}: the bucket keeps no versions, so there is no earlier one to go back to; "
                             f"turn versioning on (docs/publishing.md)")
        with db.reading(wh.path) as con:
            row = sqlfiles.run(con, "publish/version", {"target": t.label, "release": release,
                                                         "version_id": version_id}).fetchone()
        if row is None:
            raise UsageError(f"{uri}: version {version_id} was not published by this warehouse "
                             f"(`pipeline routing history --release {release}` lists them)")
        body = store.read(key, version_id)
        doc = json.loads(body)
        table = {k: v for k, v in doc.items() if k not in ("evaluation_uid", "content_sha256")}
        decision = Decision(table, doc["evaluation_uid"], row[1])
        if decision.sha256 != row[0] or decision.body != body:
            raise BucketError(f"{uri}: version {version_id} does not hold the bytes published (sha256 "
                              f"{row[0][:12]}...); not re-published")
        out += publish(wh, config, [decision], target=t.label, kind=ROLLBACK, reason=reason, actor=actor, force=True)
    return out


def history(wh: Warehouse, config: Config, release: str, target: str | None = None) -> tuple[list[str], list[tuple]]:
    """Every version of the release's object per target, newest first, beside what this warehouse recorded."""
    columns = ["target", "version_id", "written_at", "current", "kind", "reason", "actor", "evaluation_uid",
               "seconds", "sha256"]
    rows = []
    for t in _versioned_targets(config, target):
        store, key = store_of(t, config), key_of(t, release)
        with db.reading(wh.path) as con:
            ours = {r[0]: r[1:] for r in sqlfiles.run(con, "publish/history",
                                                      {"target": t.label, "release": release}).fetchall()}
        for v in store.versions(key):
            kind, why, actor, uid, seconds, sha = ours.get(v["VersionId"], ("(another writer)",) + (None,) * 5)
            rows.append((t.label, v["VersionId"], v["LastModified"], bool(v.get("IsLatest")), kind, why, actor, uid,
                         seconds, sha))
    return columns, rows
