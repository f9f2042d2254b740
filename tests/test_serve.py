"""OpenFeature and `pipeline serve`: real OpenFeature clients (the flagd provider watching the flagd file the
pipeline publishes, and the OFREP provider against `pipeline serve` on 127.0.0.1) resolve every context of a
grid to the route the routing document gives, before and after a person's rollback; the paths rollout
controllers read; hostile requests; load during a nightly write."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import jsonschema
import pytest
import referencing
import requests
from conftest import DEMO_AS_OF, ROOT, free_port, run_cli, wait_until, writer_holding

from pipeline.common.config import load_config
from pipeline.delivery.openfeature import flag_key, route_of
from pipeline.delivery.publish import stored_decision
from pipeline.warehouse import db

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCHEMAS = ROOT / "tests" / "data" / "flagd-schema"


@pytest.fixture(scope="module")
def warehouse(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The demo's warehouse judged with cells by soc, both releases published to a flagd file."""
    folder = tmp_path_factory.mktemp("serve")
    db_path, flags = folder / "telemetry.duckdb", folder / "flags" / "edge-routing.flagd.json"
    shutil.copy(demo_dir / "telemetry.duckdb", db_path)
    config = folder / "admission.yaml"
    shipped = (ROOT / "gates" / "admission.yaml").read_text()
    config.write_text(shipped.replace("\n  dimensions: []", "\n  dimensions: [soc]", 1)
                      + f"\npublish:\n  targets:\n    - {{kind: flagd, path: {str(flags)!r}}}\n")
    assert load_config(config).routing.dimensions == ("soc",)
    for release in ("4.11", "4.12"):
        done = run_cli("gate", "--release", release, "--as-of", DEMO_AS_OF, "--publish", "--no-alerts", "--db",
                       str(db_path), "--config", str(config))
        assert done.returncode in (0, 1), done.stderr
        assert f"routing {release} -> {flags}: published, " in done.stdout
    return db_path, config, flags


@pytest.fixture(scope="module")
def server(warehouse) -> Iterator[str]:
    db_path, config, _ = warehouse
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "serve", "--db", str(db_path), "--config", str(config),
                             "--port", str(port), "--refresh-seconds", "0.3"],
                            cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PIPELINE_SERVE_TOKEN": TOKEN},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"pipeline serve exited {proc.returncode}: {proc.stderr.read()}")
        try:
            return requests.get(f"{url}/healthz", timeout=1).status_code == 200
        except requests.ConnectionError:
            return False

    wait_until(up, 60, "pipeline serve answering")
    yield url
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.startswith(f"serving {db_path} on {url} (2 releases; re-read every 0.3 s)")


def table_of(warehouse, release: str) -> dict:
    db_path, config, _ = warehouse
    with db.reading(db_path) as con:
        return stored_decision(con, release, load_config(config), db.utcnow()).table


def grid(table: dict) -> list[dict]:
    """Every segment with each chip its cells name and one they do not, and a device no segment covers."""
    out = [{"task": "no_such_task", "device_tier": "low", "network_bucket": "normal", "soc": "sd8g2"}]
    for r in table["routes"]:
        segment = {k: r[k] for k in ("task", "device_tier", "network_bucket")}
        out += [{**segment, "soc": c["soc"]} for c in r.get("cells", [])] + [{**segment, "soc": "chip-not-seen"}]
    return out


def clients(flags: Path, url: str, monkeypatch):
    from openfeature import api
    from openfeature.contrib.provider.flagd import FlagdProvider
    from openfeature.contrib.provider.flagd.config import ResolverType
    from openfeature.contrib.provider.ofrep import OFREPProvider

    monkeypatch.setenv("FLAGD_OFFLINE_POLL_MS", "100")  # how often the file provider looks at the file
    api.set_provider(FlagdProvider(resolver_type=ResolverType.FILE, offline_flag_source_path=str(flags)),
                     domain="flagd")
    api.set_provider(OFREPProvider(url, headers_factory=lambda: AUTH), domain="ofrep")
    return api.get_client(domain="flagd"), api.get_client(domain="ofrep")


def resolved(client, release: str, context: dict) -> str:
    from openfeature.evaluation_context import EvaluationContext

    details = client.get_string_details(flag_key(release), "FALLBACK", EvaluationContext(attributes=context))
    assert details.error_code is None, details.error_message
    return details.value


def test_flagd_file_is_valid_against_flagds_published_schema(warehouse):
    flags = json.loads(warehouse[2].read_text())
    registry = referencing.Registry().with_resources(
        [(json.loads((SCHEMAS / n).read_text())["$id"], referencing.Resource.from_contents(
            json.loads((SCHEMAS / n).read_text()))) for n in ("flags.json", "targeting.json")])
    # by its $id: draft 7 ignores the $id beside the root's $ref, which the relative "./targeting.json" needs
    schema = {"$ref": "https://flagd.dev/schema/v0/flags.json"}
    jsonschema.Draft7Validator(schema, registry=registry).validate(flags)
    assert sorted(flags["flags"]) == ["edge-route-4.11", "edge-route-4.12"]
    assert flags["flags"]["edge-route-4.12"]["metadata"]["verdict"] == "rollback_to_cloud"
    db_path, config, path = warehouse
    for step in (("history",), ("rollback", "--to", "v1", "--reason", "r")):
        done = run_cli("routing", *step, "--release", "4.12", "--target", str(path), "--db", str(db_path),
                       "--config", str(config))
        assert done.returncode == 2
        assert done.stderr.startswith(f"pipeline routing: error: publish target {str(path)!r} (flagd) keeps no "
                                      "versions"), done.stderr


def test_every_client_resolves_every_context_as_the_routing_document_before_and_after_a_rollback(
        warehouse, server, monkeypatch):
    from openfeature import api

    db_path, config, flags = warehouse
    flagd, ofrep = clients(flags, server, monkeypatch)
    try:
        tables = {r: table_of(warehouse, r) for r in ("4.11", "4.12")}
        assert any(r.get("cells") for r in tables["4.11"]["routes"])  # the grid reaches cells
        for release, table in tables.items():
            for context in grid(table):
                expected = route_of(table, context)[0]
                assert (resolved(flagd, release, context), resolved(ofrep, release, context)) == (expected, expected), \
                    (release, context)

        edge = next(r for r in tables["4.11"]["routes"] if r["route"] == "edge")
        moved = {**{k: edge[k] for k in ("task", "device_tier", "network_bucket")}, "soc": "chip-not-seen"}
        segment = "/".join(edge[k] for k in ("task", "device_tier", "network_bucket"))
        acted = run_cli("rollout", "rollback", "--release", "4.11", "--segment", segment, "--reason",
                        "INC-7", "--no-alerts", "--db", str(db_path), "--config", str(config))
        assert acted.returncode == 0, acted.stderr
        assert f"routing 4.11 -> {flags}: published, " in acted.stdout  # the action reaches the targets at once
        done = run_cli("routing", "publish", "--release", "4.11", "--db", str(db_path), "--config", str(config))
        assert done.returncode == 0 and done.stdout.strip() == f"routing 4.11 -> {flags}: already published"
        # the file provider picks the republished file up without a restart; serve re-reads the warehouse
        wait_until(lambda: resolved(flagd, "4.11", moved) == "cloud", 10, "the flagd provider reading the new file")
        wait_until(lambda: resolved(ofrep, "4.11", moved) == "cloud", 10, "pipeline serve reading the action")
        after = table_of(warehouse, "4.11")
        for context in grid(after):
            expected = route_of(after, context)[0]
            assert (resolved(flagd, "4.11", context), resolved(ofrep, "4.11", context)) == (expected, expected)
    finally:
        api.shutdown()


def test_documents_answer_304_when_unchanged_and_controllers_read_the_verdict(warehouse, server):
    first = requests.get(f"{server}/routing/4.12.json", headers=AUTH)
    assert first.status_code == 200 and first.headers["cache-control"] == "max-age=30"
    assert first.json()["release"] == "4.12" and first.json()["verdict"] == "rollback_to_cloud"
    again = requests.get(f"{server}/routing/4.12.json", headers={**AUTH, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    context = {"context": {"task": "rewrite", "device_tier": "low", "network_bucket": "weak"}}
    bulk = requests.post(f"{server}/ofrep/v1/evaluate/flags", json=context, headers=AUTH)
    assert bulk.status_code == 200
    assert [(f["key"], f["value"]) for f in bulk.json()["flags"]] == [
        ("edge-route-4.11", route_of(table_of(warehouse, "4.11"), context["context"])[0]),
        ("edge-route-4.12", "cloud")]
    unchanged = requests.post(f"{server}/ofrep/v1/evaluate/flags", json=context,
                           headers={**AUTH, "If-None-Match": bulk.headers["etag"]})
    assert unchanged.status_code == 304
    gate = requests.get(f"{server}/gate/4.12.json", headers=AUTH).json()
    assert gate["release"] == "4.12" and gate["verdict"] == "rollback_to_cloud"
    argo = requests.get(f"{server}/argo/4.12", headers=AUTH).json()
    assert (argo["healthy"], argo["verdict"], argo["segments"]) == (False, "rollback_to_cloud", 36)
    assert requests.post(f"{server}/flagger/4.12", json={"name": "app", "namespace": "edge", "phase": "Progressing"},
                      headers=AUTH).status_code == 409
    assert "edge_pipeline_last_success_timestamp_seconds" in requests.get(f"{server}/metrics", headers=AUTH).text


def test_a_port_in_use_is_a_usage_error_naming_it(warehouse, server):
    port = server.rsplit(":", 1)[1]
    done = run_cli("serve", "--db", str(warehouse[0]), "--port", port)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"pipeline serve: error: --host 127.0.0.1 --port {port}: cannot listen there: "
                                   "Address already in use")


def test_hostile_requests_get_a_4xx_and_nothing_else(server):
    flag = f"{server}/ofrep/v1/evaluate/flags/edge-route-4.12"
    assert requests.get(f"{server}/routing/4.12.json").status_code == 401
    assert requests.get(f"{server}/routing/4.12.json", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert requests.get(f"{server}/healthz").status_code == 200
    huge = requests.post(flag, data=b'{"context": {"x": "' + b"a" * (1 << 20) + b'"}}',
                      headers={**AUTH, "Content-Type": "application/json"})
    assert huge.status_code == 413
    bad = requests.post(flag, data=b"{not json", headers=AUTH)
    assert bad.status_code == 400 and bad.json()["errorCode"] == "PARSE_ERROR"
    assert requests.post(flag, json={"context": [1, 2]}, headers=AUTH).json()["errorCode"] == "INVALID_CONTEXT"
    unknown = requests.post(f"{server}/ofrep/v1/evaluate/flags/edge-route-9.99", json={}, headers=AUTH)
    assert unknown.status_code == 404 and unknown.json()["errorCode"] == "FLAG_NOT_FOUND"
    for path in ("/routing/..%2F..%2Fetc%2Fpasswd.json", "/routing/9.99.json", "/gate/../../etc/passwd",
                 "/argo/%2e%2e", "/nothing-here"):
        assert requests.get(f"{server}{path}", headers=AUTH).status_code == 404, path
    assert requests.delete(f"{server}/routing/4.12.json", headers=AUTH).status_code == 405


def test_every_request_is_answered_under_load_during_a_nightly_write(warehouse, server):
    """200 clients at once for 3 s while another process holds the warehouse as the nightly job does: every
    request gets its answer (bench/serve.py measures the latency over 30 s)."""
    statuses: list[int] = []

    async def client(http: aiohttp.ClientSession, n: int, until: float) -> None:
        while time.monotonic() < until:
            if n % 2:
                request = http.post(f"{server}/ofrep/v1/evaluate/flags/edge-route-4.12",
                                    json={"context": {"task": "rewrite", "device_tier": "low"}})
            else:
                request = http.get(f"{server}/routing/4.11.json")
            async with request as r:
                await r.read()
                statuses.append(r.status)

    async def load() -> None:
        async with aiohttp.ClientSession(headers=AUTH, connector=aiohttp.TCPConnector(limit=200)) as http:
            until = time.monotonic() + 3
            await asyncio.gather(*(client(http, n, until) for n in range(200)))

    with writer_holding(warehouse[0], open_file=True):
        asyncio.run(load())
    assert len(statuses) > 200 and set(statuses) == {200}
