"""`pipeline serve`: the stored decisions over HTTP, read-only (docs/publishing.md "pipeline serve").

Starlette on uvicorn. Every answer comes from memory: a refresher thread reads the warehouse's newest snapshot
(docs/writer-lock.md; the file itself only before the first one) every `refresh_seconds`, so it never waits for a
writer and never holds the file a writer needs, and swaps in a new `Served` whole; a request never opens the
warehouse, runs no SQL and reads no file.

- GET  /routing/<release>.json          the routing document as an s3 target holds it (ETag, If-None-Match: 304)
- GET  /gate/<release>.json             the stored gate result (`pipeline gate --json`)
- GET  /metrics                         `pipeline metrics`
- POST /ofrep/v1/evaluate/flags/<key>   OFREP single evaluation of `edge-route-<release>` (delivery/openfeature.py)
- POST /ofrep/v1/evaluate/flags         OFREP bulk evaluation of every release's flag (ETag, If-None-Match: 304)
- GET  /argo/<release>                  for an Argo Rollouts web metric: `healthy` true or false
- POST /flagger/<release>               for a Flagger webhook: 200 keep the edge, 409 roll back, 425 not enough data
- GET  /healthz                         200 once the first read is done

Safe on a network: nothing writes; a request body over MAX_BODY bytes is refused (413) before it is read
whole, bad JSON is a 400, an unknown release or flag a 404; with PIPELINE_SERVE_TOKEN set, every path but
/healthz needs `Authorization: Bearer <token>` (401 otherwise).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.common import logs
from pipeline.common.config import Config
from pipeline.common.errors import UsageError
from pipeline.common.vocabulary import Route as Destination
from pipeline.common.vocabulary import Verdict
from pipeline.delivery.openfeature import flag_key, ofrep_answer, release_of

MAX_BODY = 16 * 1024  # an OFREP context is a few hundred bytes
MAX_ANSWERS = 4096
COMPACT = (",", ":")
TOKEN_ENV = "PIPELINE_SERVE_TOKEN"
# Flagger passes a webhook on 200-202 only: keep the edge 200, not enough data yet 425 (hold), anything else 409
TOO_EARLY, ROLL_BACK = 425, 409
HEALTHY_ROLLOUT = "ok"  # rollout/state.py status(): nothing rolled back, suspect or held


@dataclass(frozen=True)
class Release:
    table: dict[str, Any]
    body: bytes  # the routing document, as publish writes it
    etag: str
    gate: bytes  # the stored gate result
    gate_etag: str  # its own: two evaluations can make the same routing table


@dataclass(frozen=True)
class Served:
    releases: dict[str, Release] = field(default_factory=dict)
    metrics: str = ""
    generation: str = ""  # changes whenever any document does: part of the bulk ETag
    # OFREP answers by (flag key or None for bulk, request body): phones send a few distinct contexts, so most
    # evaluations are a lookup; refreshed with the documents they were computed from
    answers: dict[tuple[str | None, bytes], tuple[bytes, str]] = field(default_factory=dict)

    def remember(self, key: tuple[str | None, bytes], answer: tuple[bytes, str]) -> tuple[bytes, str]:
        if len(self.answers) >= MAX_ANSWERS:  # bounded against clients that vary the context on purpose
            self.answers.clear()
        self.answers[key] = answer
        return answer


def read_served(db_path: Path, config: Config) -> Served:
    """Every judged release's routing document and gate result, and the metrics, read once."""
    from pipeline.delivery.metrics import text
    from pipeline.delivery.publish import stored_decision
    from pipeline.warehouse import db, sqlfiles

    releases = {}
    with db.reading(db_path, prefer_snapshot=True) as con:
        now = db.utcnow()
        for (release,) in sqlfiles.run(con, "rollout/evaluated_releases").fetchall():
            decision = stored_decision(con, release, config, now)
            if decision is not None:
                gate = json.dumps(decision.result, indent=1).encode()
                releases[release] = Release(decision.table, decision.body, f'"{decision.sha256}"', gate,
                                            f'"{hashlib.sha256(gate).hexdigest()}"')
        metrics = text(con)
    generation = hashlib.sha256("".join(sorted(r.etag for r in releases.values())).encode()).hexdigest()[:16]
    return Served(releases, metrics, generation)


class Refresher:
    """Keeps `served` current: a daemon thread re-reads the warehouse every `seconds`."""

    def __init__(self, db_path: Path, config: Config, seconds: float):
        self.db_path, self.config, self.seconds = db_path, config, seconds
        self.served = read_served(db_path, config)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="serve-refresh", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.seconds):
            try:
                self.served = read_served(self.db_path, self.config)
            except Exception as exc:  # a failed read keeps the last good answers; the log says why
                logs.event("serve", step="refresh", error=f"{type(exc).__name__}: {exc}")


def app(refresher: Refresher, cache_seconds: int = 30) -> Any:
    """The Starlette application over `refresher.served`."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    token = os.environ.get(TOKEN_ENV, "")

    def error(status: int, message: str, **extra: Any) -> JSONResponse:
        return JSONResponse({"error": message, **extra}, status_code=status)

    def release_or_404(request: Request) -> Release | JSONResponse:
        release = request.path_params["release"]
        found = refresher.served.releases.get(release)
        return found if found is not None else error(404, f"no judged release {release!r}")

    def cached(request: Request, body: bytes, etag: str, media: str) -> Response:
        headers = {"ETag": etag, "Cache-Control": f"max-age={cache_seconds}"}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=media, headers=headers)

    async def body_of(request: Request) -> bytes | JSONResponse:
        declared = request.headers.get("content-length")
        if declared and (not declared.isdigit() or int(declared) > MAX_BODY):
            return error(413, f"request body over {MAX_BODY} bytes")
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                return error(413, f"request body over {MAX_BODY} bytes")
        return raw

    def context_of(raw: bytes, key: str | None) -> dict[str, Any] | JSONResponse:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return JSONResponse({"key": key, "errorCode": "PARSE_ERROR", "errorDetails": "the body is not JSON"},
                                status_code=400)
        context = body.get("context", {}) if isinstance(body, dict) else None
        if not isinstance(context, dict):
            return JSONResponse({"key": key, "errorCode": "INVALID_CONTEXT",
                                 "errorDetails": "`context` must be a JSON object"}, status_code=400)
        return context

    async def ofrep(request: Request, key: str | None) -> Response:
        raw = await body_of(request)
        if isinstance(raw, Response):
            return raw
        served = refresher.served
        answer = served.answers.get((key, raw))
        if answer is None:
            context = context_of(raw, key)
            if isinstance(context, Response):
                return context
            answer = evaluate(served, key, context)
            if isinstance(answer, Response):
                return answer
            answer = served.remember((key, raw), answer)
        body, etag = answer
        if key is None:  # the bulk answer carries an ETag; a provider polling with it gets a 304
            if request.headers.get("if-none-match") == etag:
                return Response(status_code=304, headers={"ETag": etag})
            return Response(body, media_type="application/json", headers={"ETag": etag})
        return Response(body, media_type="application/json")

    def evaluate(served: Served, key: str | None, context: dict[str, Any]) -> tuple[bytes, str] | Response:
        """One flag's answer (`key`) or every release's (None), as JSON bytes and the bulk ETag."""
        if key is None:
            digest = hashlib.sha256(json.dumps(context, sort_keys=True, default=str).encode()
                                    + served.generation.encode())
            flags = [ofrep_answer(flag_key(r), served.releases[r].table, context) for r in sorted(served.releases)]
            return json.dumps({"flags": flags}, separators=COMPACT).encode(), f'"{digest.hexdigest()[:32]}"'
        release = release_of(key)
        found = served.releases.get(release) if release else None
        if found is None:
            return JSONResponse({"key": key, "errorCode": "FLAG_NOT_FOUND",
                                 "errorDetails": f"no flag {key!r}; flags are {flag_key('<release>')}"},
                                status_code=404)
        return json.dumps(ofrep_answer(key, found.table, context), separators=COMPACT).encode(), ""

    async def routing(request: Request) -> Response:
        found = release_or_404(request)
        return found if isinstance(found, Response) else cached(request, found.body, found.etag, "application/json")

    async def gate(request: Request) -> Response:
        found = release_or_404(request)
        if isinstance(found, Response):
            return found
        return cached(request, found.gate, found.gate_etag, "application/json")

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(refresher.served.metrics, media_type="text/plain; version=0.0.4")

    async def ofrep_one(request: Request) -> Response:
        return await ofrep(request, request.path_params["key"])

    async def ofrep_bulk(request: Request) -> Response:
        return await ofrep(request, None)

    def verdict(found: Release) -> dict[str, Any]:
        """healthy: the gate keeps the edge and the rollout is ok (nothing rolled back, suspect or held)."""
        t = found.table
        off = sum(r["route"] != Destination.EDGE for r in t["routes"])
        return {"release": t["release"], "verdict": t["verdict"], "rollout": t["rollout"],
                "healthy": t["verdict"] == Verdict.KEEP_EDGE and t["rollout"] == HEALTHY_ROLLOUT,
                "segments": len(t["routes"]), "segments_off_the_edge": off, "derived_at": t["derived_at"]}

    async def argo(request: Request) -> Response:
        found = release_or_404(request)
        return found if isinstance(found, Response) else JSONResponse(verdict(found))

    async def flagger(request: Request) -> Response:
        found = release_or_404(request)
        if isinstance(found, Response):
            return found
        answer = verdict(found)
        early = answer["verdict"] == Verdict.INSUFFICIENT_DATA
        status = 200 if answer["healthy"] else TOO_EARLY if early else ROLL_BACK
        return JSONResponse(answer, status_code=status)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse(f"ok: {len(refresher.served.releases)} releases\n")

    routes = [Route("/healthz", healthz), Route("/metrics", metrics),
              Route("/routing/{release}.json", routing), Route("/gate/{release}.json", gate),
              Route("/argo/{release}", argo), Route("/flagger/{release}", flagger, methods=["POST"]),
              Route("/ofrep/v1/evaluate/flags", ofrep_bulk, methods=["POST"]),
              Route("/ofrep/v1/evaluate/flags/{key}", ofrep_one, methods=["POST"])]
    application = Starlette(routes=routes)

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if token and scope["type"] == "http" and scope["path"] != "/healthz":
            given = dict(scope["headers"]).get(b"authorization", b"").decode(errors="replace")
            if not hmac.compare_digest(given, f"Bearer {token}"):
                await error(401, "a bearer token is required", hint=f"Authorization: Bearer ${TOKEN_ENV}")(
                    scope, receive, send)
                return
        await application(scope, receive, send)

    return guarded


def serve(db_path: Path, config: Config, host: str, port: int, refresh_seconds: float,
          cache_seconds: int = 30) -> None:
    """Serve until SIGTERM or Ctrl-C (uvicorn handles both: it finishes the requests in flight)."""
    import signal
    import socket

    import uvicorn

    try:  # uvicorn would log the failure and exit 3, the gate's insufficient_data: said here, exit 2
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        said = os.strerror(exc.errno) if exc.errno else str(exc)
        raise UsageError(f"--host {host} --port {port}: cannot listen there: {said}") from None

    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then raises the signal again to the handler it found:
    # this one, so a stop asked for exits 0 instead of dying by the signal
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    refresher = Refresher(db_path, config, refresh_seconds)
    refresher.start()
    print(f"serving {db_path} on http://{host}:{port} ({len(refresher.served.releases)} releases; re-read every "
          f"{refresh_seconds:g} s)", flush=True)
    server = uvicorn.Server(uvicorn.Config(app(refresher, cache_seconds), host=host, port=port, log_level="warning",
                                           access_log=False, timeout_keep_alive=5, limit_concurrency=2000,
                                           h11_max_incomplete_event_size=MAX_BODY))
    try:
        server.run()
    finally:
        refresher.stop()
