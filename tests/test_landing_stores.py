"""The landing and publish tests that every object store must pass, against each store's real API server on 127.0.0.1:
moto's S3, gcp-storage-emulator's Google Cloud Storage and Azurite's Azure Blob, each driven through the
platform's own client (boto3, google-cloud-storage, azure-storage-blob). The S3-only details (multipart ETags,
listing page tokens, the configured endpoint) are in tests/test_landing_s3.py."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, azure_env, counts, query, run_cli, s3_env, valid_table, wait_until, with_values
from test_landing_s3 import S3Proxy, _first

from pipeline.common.errors import UsageError
from pipeline.ingest.object_store import BucketUri, parse_uri

AS_OF = "2026-12-02T12:00:00"


class Landing:
    """A fresh bucket (an Azure container) in one store: objects put and deleted with the platform's client,
    the environment the commands need, and the requests that list or read an object."""

    def __init__(self, scheme: str, endpoint: str):
        self.scheme, self.endpoint = scheme, endpoint
        self.bucket = f"landing-{uuid.uuid4().hex[:12]}"
        if scheme == "s3":
            import boto3
            from botocore.config import Config as BotoConfig

            for key, value in s3_env(endpoint).items():
                os.environ.setdefault(key, value)
            self._s3 = boto3.client("s3", endpoint_url=endpoint, config=BotoConfig(s3={"addressing_style": "path"}))
            self._s3.create_bucket(Bucket=self.bucket)
        elif scheme == "gs":
            from google.auth.credentials import AnonymousCredentials
            from google.cloud import storage

            client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                    client_options={"api_endpoint": endpoint})
            self._gcs = client.create_bucket(self.bucket)
        else:
            from azure.storage.blob import BlobServiceClient

            service = BlobServiceClient.from_connection_string(self.env()["AZURE_STORAGE_CONNECTION_STRING"])
            self._az = service.create_container(self.bucket)

    def uri(self, prefix: str = "up/") -> str:
        return f"{self.scheme}://{self.bucket}/{prefix}"

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The variables that point the platform's client at the store (or at a proxy in front of it)."""
        endpoint = endpoint or self.endpoint
        if self.scheme == "s3":
            return s3_env(endpoint)
        if self.scheme == "gs":
            return {"STORAGE_EMULATOR_HOST": endpoint}
        return azure_env(endpoint if endpoint.endswith("/devstoreaccount1") else f"{endpoint}/devstoreaccount1")

    def put(self, key: str, data: pa.Table | bytes) -> None:
        if isinstance(data, pa.Table):
            sink = io.BytesIO()
            pq.write_table(data, sink)
            data = sink.getvalue()
        if self.scheme == "s3":
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=data)
        elif self.scheme == "gs":
            self._gcs.blob(key).upload_from_string(data)
        else:
            self._az.upload_blob(key, data, overwrite=True)

    def modified(self, key: str) -> str:
        """When the store says the object was written (its LastModified), UTC to the second."""
        if self.scheme == "s3":
            when = self._s3.head_object(Bucket=self.bucket, Key=key)["LastModified"]
        elif self.scheme == "gs":
            when = self._gcs.get_blob(key).updated
        else:
            when = self._az.get_blob_client(key).get_blob_properties().last_modified
        return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def delete(self, key: str) -> None:
        if self.scheme == "s3":
            self._s3.delete_object(Bucket=self.bucket, Key=key)
        elif self.scheme == "gs":
            self._gcs.blob(key).delete()
        else:
            self._az.delete_blob(key)

    def get(self, key: str) -> tuple[bytes, str | None]:
        """The object's bytes and its Cache-Control, read by the platform's client as an app's backend would."""
        if self.scheme == "s3":
            got = self._s3.get_object(Bucket=self.bucket, Key=key)
            return got["Body"].read(), got.get("CacheControl")
        if self.scheme == "gs":
            blob = self._gcs.get_blob(key)
            cache_control = blob.cache_control  # a download sets it from the answer's headers, which the emulator omits
            return blob.download_as_bytes(), cache_control
        blob = self._az.get_blob_client(key)
        return blob.download_blob().readall(), blob.get_blob_properties().content_settings.cache_control

    def is_listing(self, method: str, path: str) -> bool:
        if self.scheme == "s3":
            return method == "GET" and "list-type=2" in path
        if self.scheme == "gs":
            return method == "GET" and path.split("?")[0].endswith(f"/b/{self.bucket}/o")
        return method == "GET" and "comp=list" in path

    def is_object_get(self, method: str, path: str) -> bool:
        """A request for an object's bytes (GCS: its metadata first, then `alt=media`)."""
        return method == "GET" and path.split("?")[0].endswith(".parquet")


@pytest.fixture(params=["s3", "gs", "az"])
def landing(request: pytest.FixtureRequest) -> Landing:
    endpoint = request.getfixturevalue({"s3": "s3_endpoint", "gs": "gcs_endpoint", "az": "azurite_endpoint"}[
        request.param])
    return Landing(request.param, endpoint.removesuffix("/devstoreaccount1"))


def ingest(landing: Landing, db: Path, *more: str, endpoint: str | None = None):
    return run_cli("ingest", landing.uri(), "--db", str(db), "--as-of", AS_OF, *more, env=landing.env(endpoint))


def ingest_json(landing: Landing, db: Path, *more: str, endpoint: str | None = None) -> dict:
    done = ingest(landing, db, "--json", *more, endpoint=endpoint)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("text", "uri"), [
    ("s3://b/up/", BucketUri("b", "up/", "s3")),
    ("gs://b/up/dt=2026-12-01/", BucketUri("b", "up/dt=2026-12-01/", "gs")),
    ("gcs://b", BucketUri("b", "", "gs")),
    ("az://landing/up/", BucketUri("landing", "up/", "az")),
    ("abfss://landing@account.dfs.core.windows.net/up/", BucketUri("landing", "up/", "az")),
])
def test_each_store_is_named_by_its_uri(text, uri):
    assert parse_uri(text) == uri
    assert str(uri) == f"{uri.scheme}://{uri.bucket}/{uri.prefix}"


@pytest.mark.parametrize(("text", "said"), [
    ("wasbs://c@a.blob.core.windows.net/x", "wasbs://c@a.blob.core.windows.net/x: wasbs:// is not read; give a local "
                                           "folder, s3://, gs:// or az://bucket/prefix"),
    ("ftp://host/x", "ftp://host/x: not a landing this pipeline reads; give a local folder, s3://, gs:// or "
                     "az://bucket/prefix"),
    ("gs:///up/", "gs:///up/: no bucket named; e.g. gs://telemetry-landing/uploads/"),
])
def test_a_uri_no_store_reads_is_a_usage_error_naming_it(text, said):
    with pytest.raises(UsageError) as raised:
        parse_uri(text)
    assert str(raised.value) == said


def test_ingest_counts_exactly_and_a_rerun_fetches_nothing(landing, tmp_path):
    bad = with_values(with_values(valid_table(300, seed=2), 0, route="teleport"), 5, total_ms=-1.0)
    landing.put("up/dt=2026-12-01/a.parquet", valid_table(1_000, seed=3))
    landing.put("up/dt=2026-12-01/b.parquet", valid_table(2_000, seed=1))
    landing.put("up/dt=2026-12-02/bad-rows.parquet", bad)
    landing.put("up/dt=2026-12-02/notes.csv", b"a,b\n1,2\n")
    landing.put("up/_SUCCESS", b"")
    landing.put("up/_temporary/0/part-0.parquet", b"half written")
    landing.put("elsewhere/x.parquet", valid_table(10, seed=4))
    db = tmp_path / "t.duckdb"
    time.sleep(1.1)  # a copy's own mtime would be a later second than the objects'

    first = ingest_json(landing, db)
    assert (first["files"], first["loaded_files"], first["rows_read"]) == (3, 3, 3_300)
    for f in first["per_file"]:  # each loaded file landed when the store says its object was written
        assert f["landed_at"] == landing.modified(f["path"].removeprefix(f"{landing.scheme}://{landing.bucket}/"))
    assert (first["accepted"], first["quarantined"], first["duplicates"]) == (3_298, 2, 0)
    assert first["sources"] == [{"uri": landing.uri(), "start_after": "", "listed": 3, "already_read": 0,
                                 "not_parquet": 1, "not_parquet_examples": [landing.uri("up/dt=2026-12-02/notes.csv")],
                                 "last_key": "up/dt=2026-12-02/bad-rows.parquet"}]
    assert sorted(f["path"] for f in first["per_file"]) == [landing.uri(f"up/dt=2026-12-0{k}") for k in (
        "1/a.parquet", "1/b.parquet", "2/bad-rows.parquet")]
    assert counts(db)["events"] == 3_298 and counts(db)["quarantine"] == 2

    again = ingest(landing, db)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:2] == [
        f"{landing.uri()}: listed 3 Parquet objects (from after 'up/dt=2026-12-01/'): 0 fetched, 3 read before; "
        "1 not Parquet (not read)",
        "0 files: 0 loaded, 0 rejected, 0 already ingested"]
    landing.put("up/dt=2026-12-02/late.parquet", valid_table(40, seed=9))  # more in the newest folder
    third = ingest_json(landing, db)
    assert (third["loaded_files"], third["accepted"], third["sources"][0]["already_read"]) == (1, 40, 3)
    assert counts(db)["events"] == counts(db)["distinct_ids"] == 3_338


def test_503s_and_a_body_cut_short_are_retried_to_exact_counts(landing, tmp_path):
    for i in range(4):
        landing.put(f"up/dt=2026-12-01/f{i}.parquet", valid_table(250, seed=20 + i))
    listing_503s, get_503s = _first(2, landing.is_listing), _first(3, landing.is_object_get)
    cut = _first(1, landing.is_object_get, "cut")
    proxy = S3Proxy(landing.endpoint, lambda m, p: listing_503s(m, p) or get_503s(m, p) or cut(m, p))
    db = tmp_path / "t.duckdb"
    try:
        done = ingest_json(landing, db, endpoint=proxy.url)
    finally:
        proxy.close()
    assert (done["loaded_files"], done["rows_read"], done["accepted"]) == (4, 1_000, 1_000)
    assert counts(db)["events"] == counts(db)["distinct_ids"] == 1_000
    assert sum(landing.is_listing(*r) for r in proxy.requests) >= 3  # two 503s, then the listing
    assert sum(landing.is_object_get(*r) for r in proxy.requests) >= 4 + 3 + 1


def test_an_object_deleted_after_the_listing_is_reported_and_the_rest_load(landing, tmp_path):
    landing.put("up/dt=2026-12-01/gone.parquet", valid_table(10, seed=30))
    landing.put("up/dt=2026-12-01/kept.parquet", valid_table(20, seed=31))
    deleted: list[bool] = []

    def between_list_and_read(method: str, path: str) -> object:
        if method == "GET" and path.split("?")[0].endswith("gone.parquet") and not deleted:
            deleted.append(True)
            return lambda: landing.delete("up/dt=2026-12-01/gone.parquet")
        return None

    proxy = S3Proxy(landing.endpoint, between_list_and_read)
    db = tmp_path / "t.duckdb"
    try:
        done = ingest(landing, db, endpoint=proxy.url)
    finally:
        proxy.close()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1:3] == ["2 files: 1 loaded, 0 rejected, 0 already ingested, 1 vanished",
                          "20 rows read: 20 accepted, 0 quarantined, 0 duplicates"]
    assert f"  vanished {landing.uri('up/dt=2026-12-01/gone.parquet')}: deleted after it was listed; not read" in lines
    assert counts(db)["events"] == 20


def test_a_missing_bucket_fails_at_once_naming_it(landing, tmp_path):
    missing = Landing.__new__(Landing)
    missing.scheme, missing.endpoint, missing.bucket = landing.scheme, landing.endpoint, "no-such-bucket"
    done = ingest(missing, tmp_path / "t.duckdb")
    assert done.returncode == 2
    said = done.stderr.splitlines()[-1]
    assert said.startswith(f"pipeline ingest: error: listing {missing.uri()}: "), done.stderr
    assert "http://" not in said and "Traceback" not in done.stderr


def test_sigterm_while_fetching_stores_nothing_of_the_chunk_and_the_rerun_is_exact(landing, tmp_path):
    for i in range(12):
        landing.put(f"up/dt=2026-12-01/f{i:02d}.parquet", valid_table(10, seed=50 + i))
    fetching = threading.Event()

    def slow_gets(method: str, path: str) -> object:
        if landing.is_object_get(method, path):
            fetching.set()
            return lambda: time.sleep(0.5)
        return None

    proxy = S3Proxy(landing.endpoint, slow_gets)
    db = tmp_path / "t.duckdb"
    try:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline", "ingest", landing.uri(), "--db", str(db)],
                                cwd=ROOT, env={**os.environ, **landing.env(proxy.url)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(fetching.is_set, 120, "the first object fetched")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proxy.close()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == ("pipeline ingest: stopped by a signal after the last whole file; run it "
                                            "again to finish")
    asked = {path.split("?")[0].rsplit("/", 1)[-1] for method, path in proxy.requests
             if landing.is_object_get(method, path)}
    assert len(asked) < 12  # the fetches not begun were never asked for
    assert query(db, "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM landed_objects)") == [(0, 0)]
    again = ingest_json(landing, db)
    assert (again["loaded_files"], again["accepted"]) == (12, 120)
    assert counts(db)["events"] == counts(db)["distinct_ids"] == 120


@pytest.fixture(scope="module")
def sample_in_a_folder(tmp_path_factory: pytest.TempPathFactory) -> list[tuple]:
    db = tmp_path_factory.mktemp("folder") / "t.duckdb"
    assert run_cli("ingest", "--db", str(db), "--as-of", "2026-12-01", str(ROOT / "sample_logs")).returncode == 0
    return query(db, "SELECT count(*), sum(total_ms) FROM events")


def test_nightly_reads_each_store_as_it_reads_the_folder(landing, tmp_path, sample_in_a_folder):
    for path in sorted((ROOT / "sample_logs").rglob("*.parquet")):
        landing.put(f"up/dt=2026-12-01/{path.parent.name}-{path.name}", path.read_bytes())
    db = tmp_path / "t.duckdb"
    done = run_cli("nightly", "--landing", landing.uri(), "--db", str(db), "--as-of", "2026-12-01", "--json",
                   env=landing.env())
    assert done.returncode in (0, 1), done.stderr
    run = json.loads(done.stdout)
    assert run["steps"]["ingest"]["loaded_files"] == 4 and run["steps"]["ingest"]["rows_read"] == 36_000
    assert query(db, "SELECT count(*), sum(total_ms) FROM events") == sample_in_a_folder



PUBLISH_KIND = {"s3": "s3", "gs": "gcs", "az": "azure"}


def test_publish_writes_each_store_conditionally_and_a_second_writer_is_refused(landing, tmp_path, demo_dir):
    import shutil

    from test_publish import expected_body

    db_path, config = tmp_path / "telemetry.duckdb", tmp_path / "admission.yaml"
    shutil.copy(demo_dir / "telemetry.duckdb", db_path)
    config.write_text((ROOT / "gates" / "admission.yaml").read_text() + "\npublish:\n  targets:\n"
                      f"    - {{kind: {PUBLISH_KIND[landing.scheme]}, uri: '{landing.uri('routing/')}', "
                      "cache_control: 'max-age=30'}\n  retry_seconds: 2\n")
    key = "routing/routing-4.12.json"

    def cli(*args: str):
        return run_cli(*args, "--db", str(db_path), "--config", str(config), env=landing.env())

    first = cli("routing", "publish", "--release", "4.12")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"routing 4.12 -> {landing.uri(key)}: published"), first.stdout
    assert landing.get(key) == (expected_body(db_path, config), "max-age=30")
    again = cli("routing", "publish", "--release", "4.12")
    assert again.returncode == 0 and "already published" in again.stdout, again.stdout

    landing.put(key, b'{"routes": []}')  # another writer
    acted = cli("rollout", "rollback", "--release", "4.12", "--reason", "INC-1", "--actor", "oncall")
    if landing.scheme == "gs":
        # gcp-storage-emulator ignores ifGenerationMatch (GCS itself answers 412): the write goes through there
        assert acted.returncode == 0, acted.stderr
        assert json.loads(landing.get(key)[0])["routes"][0]["route"] == "cloud"
        return
    assert acted.returncode == 2 and "NOT PUBLISHED" in acted.stderr, acted.stderr
    refused = cli("routing", "publish", "--release", "4.12")
    assert refused.returncode == 2
    assert (f"{landing.uri(key)}: not published: another writer changed it since this warehouse's last write"
            in refused.stderr), refused.stderr
    assert landing.get(key)[0] == b'{"routes": []}'


@pytest.mark.parametrize(("uri", "env", "said"), [
    ("gs://landing/up/", {"GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent", "STORAGE_EMULATOR_HOST": ""},
     "listing gs://landing/up/: no Google credentials found (GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth "
     "application-default login`, or the metadata server)"),
    ("az://landing/up/", {"AZURE_STORAGE_CONNECTION_STRING": "", "AZURE_STORAGE_ACCOUNT": ""},
     "az://landing/up/: no Azure credentials found (AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with a "
     "service principal's AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, a managed identity or `az login`)"),
])
def test_no_credentials_is_one_line_saying_where_they_are_looked_for(uri, env, said, tmp_path):
    done = run_cli("ingest", uri, "--db", str(tmp_path / "t.duckdb"), env=env)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"pipeline ingest: error: {said}"
