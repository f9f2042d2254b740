"""The routing table published where the apps read it (pipeline/delivery/publish.py), against moto's real S3
server on 127.0.0.1: conditional writes, versions, rollback, Cache-Control, and a decision that survives a kill
between deciding and publishing."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEMO_AS_OF, ROOT, SECRET, query, run_cli, s3_env
from test_output_schema import _validator

from pipeline.common.config import load_config
from pipeline.delivery.publish import stored_decision
from pipeline.warehouse import db

KEY = "routing/routing-4.12.json"


@pytest.fixture
def versioned(s3, bucket: str) -> str:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def setup(tmp_path: Path, demo_dir: Path, bucket: str, endpoint: str = "") -> tuple[Path, Path]:
    """The demo's warehouse (judged as of DEMO_AS_OF) and a config publishing to `bucket`."""
    shutil.copy(demo_dir / "telemetry.duckdb", tmp_path / "telemetry.duckdb")
    config = tmp_path / "admission.yaml"
    extra = f", endpoint_url: {endpoint!r}" if endpoint else ""
    config.write_text((ROOT / "gates" / "admission.yaml").read_text() + "\npublish:\n  targets:\n"
                      f"    - {{kind: s3, uri: 's3://{bucket}/routing/', cache_control: 'max-age=30'{extra}}}\n"
                      "  retry_seconds: 2\n")
    return tmp_path / "telemetry.duckdb", config


def cli(db_path: Path, config: Path, endpoint: str, *args: str):
    return run_cli(*args, "--db", str(db_path), "--config", str(config), env=s3_env(endpoint))


def expected_body(db_path: Path, config: Path, release: str = "4.12") -> bytes:
    with db.reading(db_path) as con:
        return stored_decision(con, release, load_config(config), db.utcnow()).body


def test_publish_refuses_another_writer_lists_versions_and_rolls_back_to_the_earlier_bytes(
        tmp_path, demo_dir, s3, versioned, s3_endpoint):
    db_path, config = setup(tmp_path, demo_dir, versioned)
    first = cli(db_path, config, s3_endpoint, "routing", "publish", "--release", "4.12")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"routing 4.12 -> s3://{versioned}/{KEY}: published, version ")
    got = s3.get_object(Bucket=versioned, Key=KEY)
    body = got["Body"].read()
    assert body == expected_body(db_path, config)
    doc = json.loads(body)
    assert got["CacheControl"] == "max-age=30" and got["ContentType"] == "application/json"
    assert doc["release"] == "4.12" and doc["verdict"] == "rollback_to_cloud" and len(doc["routes"]) == 36
    _validator("routing").validate(doc)  # `pipeline schema routing` describes the published object too
    table = {k: v for k, v in doc.items() if k not in ("evaluation_uid", "content_sha256")}
    assert doc["content_sha256"] == hashlib.sha256(
        json.dumps(table, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert doc["evaluation_uid"] == query(db_path, "SELECT evaluation_uid FROM evaluations WHERE release = '4.12' "
                                                   "ORDER BY evaluated_at DESC, evaluation_id DESC LIMIT 1")[0][0]
    first_version = got["VersionId"]

    again = cli(db_path, config, s3_endpoint, "routing", "publish", "--release", "4.12")
    assert again.returncode == 0 and again.stdout.strip() == (
        f"routing 4.12 -> s3://{versioned}/{KEY}: already published (version {first_version})")

    # a person takes the release to the cloud: a new decision, published over the pipeline's own version
    acted = cli(db_path, config, s3_endpoint, "rollout", "rollback", "--release", "4.12", "--reason", "INC-1",
                "--actor", "oncall")
    assert acted.returncode == 0, acted.stderr
    assert f"routing 4.12 -> s3://{versioned}/{KEY}: published, version " in acted.stdout
    second = cli(db_path, config, s3_endpoint, "routing", "publish", "--release", "4.12")
    assert second.returncode == 0 and "already published" in second.stdout, second.stderr
    second_version = s3.head_object(Bucket=versioned, Key=KEY)["VersionId"]
    assert second_version != first_version
    assert {r["route"] for r in json.loads(s3.get_object(Bucket=versioned, Key=KEY)["Body"].read())["routes"]} \
        == {"cloud"}

    # another writer replaces the object: the pipeline's next write is refused, naming that version
    other = s3.put_object(Bucket=versioned, Key=KEY, Body=b'{"routes": []}')
    resumed = cli(db_path, config, s3_endpoint, "rollout", "resume", "--release", "4.12", "--reason", "INC-1 over",
                  "--actor", "oncall")
    assert resumed.returncode == 2 and "NOT PUBLISHED" in resumed.stderr  # stored, but not at the target
    refused = cli(db_path, config, s3_endpoint, "routing", "publish", "--release", "4.12")
    assert refused.returncode == 2
    assert (f"s3://{versioned}/{KEY}: not published: another writer changed it since this warehouse's last write "
            f"(version {other['VersionId']}, written ") in refused.stderr
    assert f"--replace {other['VersionId']}` writes over it" in refused.stderr
    assert "Traceback" not in refused.stderr and SECRET not in refused.stderr
    assert s3.get_object(Bucket=versioned, Key=KEY)["Body"].read() == b'{"routes": []}'
    assert query(db_path, "SELECT count(*) FROM alerts WHERE verdict = 'publish_failed'")[0][0] >= 1
    taken = cli(db_path, config, s3_endpoint, "routing", "publish", "--release", "4.12", "--replace",
                other["VersionId"], "--reason", "the test's writer was wrong")
    assert taken.returncode == 0, taken.stderr
    third_version = s3.head_object(Bucket=versioned, Key=KEY)["VersionId"]

    listed = cli(db_path, config, s3_endpoint, "routing", "history", "--release", "4.12", "--json")
    assert listed.returncode == 0, listed.stderr
    versions = json.loads(listed.stdout)
    assert [v["version_id"] for v in versions] == [third_version, other["VersionId"], second_version, first_version]
    assert [v["kind"] for v in versions] == ["takeover", "(another writer)", "decision", "decision"]
    assert [v["current"] for v in versions] == [True, False, False, False]

    back = cli(db_path, config, s3_endpoint, "routing", "rollback", "--release", "4.12", "--to", first_version,
               "--reason", "INC-2: back to the gate's first table", "--actor", "oncall")
    assert back.returncode == 0, back.stderr
    now = s3.get_object(Bucket=versioned, Key=KEY)
    assert now["Body"].read() == body and now["VersionId"] not in (first_version, second_version, third_version)
    assert now["CacheControl"] == "max-age=30"
    assert query(db_path, "SELECT kind, reason, actor, sha256 FROM routing_publishes WHERE status = 'published' "
                          "ORDER BY published_at DESC LIMIT 1")[0] == (
        "rollback", "INC-2: back to the gate's first table", "oncall", doc["content_sha256"])
    # the rollback stands until the decision changes: publishing the same decision again writes nothing
    held = cli(db_path, config, s3_endpoint, "routing", "publish", "--release", "4.12")
    assert held.returncode == 0 and "already published" in held.stdout
    assert s3.get_object(Bucket=versioned, Key=KEY)["Body"].read() == body


def test_rollback_to_a_version_this_warehouse_did_not_publish_is_refused(tmp_path, demo_dir, s3, versioned,
                                                                         s3_endpoint):
    db_path, config = setup(tmp_path, demo_dir, versioned)
    assert cli(db_path, config, s3_endpoint, "routing", "publish", "--release", "4.12").returncode == 0
    done = cli(db_path, config, s3_endpoint, "routing", "rollback", "--release", "4.12", "--to", "nope",
               "--reason", "x")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"pipeline routing: error: s3://{versioned}/{KEY}: version nope was not published "
                                   "by this warehouse (`pipeline routing history --release 4.12` lists them)")


def test_a_gate_killed_between_its_decision_and_the_publish_is_published_by_the_next_run(
        tmp_path, demo_dir, s3, versioned, s3_endpoint):
    # the target's endpoint accepts connections and never answers: the gate stores its decision, then hangs
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    hang = f"http://127.0.0.1:{silent.getsockname()[1]}"
    db_path, config = setup(tmp_path, demo_dir, versioned, endpoint=hang)
    before = query(db_path, "SELECT count(*) FROM evaluations WHERE release = '4.12'")[0][0]
    gate = subprocess.Popen([sys.executable, "-m", "pipeline", "gate", "--release", "4.12", "--as-of", DEMO_AS_OF,
                             "--routing-out", str(tmp_path / "routing-4.12.json"), "--db", str(db_path),
                             "--config", str(config), "--no-alerts"],
                            cwd=ROOT, env={**s3_env(s3_endpoint), "PATH": "/usr/bin:/bin", "CI": ""},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    silent.settimeout(120)
    conn, _ = silent.accept()  # the gate is writing the object: its decision is stored
    gate.send_signal(signal.SIGKILL)
    gate.wait()
    conn.close()
    silent.close()
    assert query(db_path, "SELECT count(*) FROM evaluations WHERE release = '4.12'")[0][0] == before + 1
    assert query(db_path, "SELECT count(*) FROM routing_publishes")[0][0] == 0
    assert "Contents" not in s3.list_objects_v2(Bucket=versioned)

    config.write_text(config.read_text().replace(f", endpoint_url: {hang!r}", ""))
    done = cli(db_path, config, s3_endpoint, "routing", "publish", "--release", "4.12")
    assert done.returncode == 0, done.stderr
    body = s3.get_object(Bucket=versioned, Key=KEY)["Body"].read()
    assert body == expected_body(db_path, config)
    assert json.loads(body)["routes"] == json.loads((tmp_path / "routing-4.12.json").read_text())["routes"]
    assert json.loads(body)["evaluation_uid"] == query(
        db_path, "SELECT evaluation_uid FROM evaluations ORDER BY evaluation_id DESC LIMIT 1")[0][0]


def test_nightly_keeps_each_release_object_equal_to_its_latest_decision(tmp_path, demo_dir, s3, versioned,
                                                                         s3_endpoint):
    db_path, config = setup(tmp_path, demo_dir, versioned)
    shutil.copytree(demo_dir / "sample_logs", tmp_path / "sample_logs")
    seen: dict[str, set[str]] = {"4.11": set(), "4.12": set()}
    for night in ("2026-12-02", "2026-12-03", "2026-12-04"):
        done = cli(db_path, config, s3_endpoint, "nightly", "--landing", str(tmp_path / "sample_logs"),
                   "--as-of", night, "--json")
        assert done.returncode in (0, 4), done.stderr  # 4: nothing new landed for days, a data-quality alarm
        steps = json.loads(done.stdout)["steps"]["gate"]
        assert sorted((p["release"], p["outcome"]) for p in steps["publish"]) == [("4.11", "published"),
                                                                                   ("4.12", "published")]
        for release in seen:
            got = s3.get_object(Bucket=versioned, Key=f"routing/routing-{release}.json")
            assert got["Body"].read() == expected_body(db_path, config, release)
            seen[release].add(got["VersionId"])
    assert all(len(v) == 3 for v in seen.values())
    seconds = query(db_path, "SELECT min(seconds), max(seconds) FROM routing_publishes")[0]
    assert 0 <= seconds[0] <= seconds[1] < 30

    # state, the metrics and the report tell the same last publish
    version = s3.head_object(Bucket=versioned, Key=KEY)["VersionId"]
    last = query(db_path, "SELECT published_at, seconds FROM routing_publishes WHERE release = '4.12' "
                          "ORDER BY published_at DESC LIMIT 1")[0]
    line = (f"routing published to s3://{versioned}/routing/ at {last[0]:%Y-%m-%dT%H:%M:%SZ}, {last[1]:.1f} s after "
            f"the decision (version {version})")
    state = cli(db_path, config, s3_endpoint, "state", "--release", "4.12")
    assert state.returncode == 0 and state.stdout.splitlines()[-1] == line
    as_json = json.loads(cli(db_path, config, s3_endpoint, "state", "--release", "4.12", "--json").stdout)
    assert [(p["status"], p["version_id"]) for p in as_json["published"]] == [("published", version)]
    metrics = run_cli("metrics", "--db", str(db_path)).stdout
    assert (f'edge_pipeline_routing_publish_seconds{{release="4.12",target="s3://{versioned}/routing/"}} '
            f"{last[1]}") in metrics
    assert f'edge_pipeline_routing_publish_failing{{release="4.12",target="s3://{versioned}/routing/"}} 0.0' in metrics
    report = cli(db_path, config, s3_endpoint, "report", "--release", "4.12", "--out", str(tmp_path / "r.html"))
    assert report.returncode == 0 and line in (tmp_path / "r.html").read_text()


def test_an_unreachable_store_fails_the_nightly_keeps_the_decision_and_alerts(tmp_path, demo_dir, s3, versioned,
                                                                                 s3_endpoint):
    db_path, config = setup(tmp_path, demo_dir, versioned, endpoint=f"http://127.0.0.1:{_closed_port()}")
    shutil.copytree(demo_dir / "sample_logs", tmp_path / "sample_logs")
    done = cli(db_path, config, s3_endpoint, "nightly", "--landing", str(tmp_path / "sample_logs"),
               "--as-of", "2026-12-02")
    assert done.returncode == 2
    assert "routing not published: " in done.stdout + done.stderr
    assert "publish.retry_seconds" in done.stdout + done.stderr
    assert query(db_path, "SELECT count(*) FROM routing_publishes WHERE status = 'failed'")[0][0] == 2
    state = cli(db_path, config, s3_endpoint, "state", "--release", "4.12")
    assert state.stdout.splitlines()[-1].startswith(f"routing NOT published to s3://{versioned}/routing/ at ")
    assert state.stdout.splitlines()[-1].endswith("; never published")
    alerts = query(db_path, "SELECT DISTINCT release, severity, payload->>'title' FROM alerts "
                            "WHERE verdict = 'publish_failed' ORDER BY release")
    assert alerts == [(r, "critical", "Routing not published to 1 target(s): the phones keep the previous routes")
                      for r in ("4.11", "4.12")]


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
