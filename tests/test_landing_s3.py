"""s3:// landings against a real S3 API server: moto's, started on 127.0.0.1 (a free port) for this module,
with a small forwarding proxy in front of it where a test needs a 503, a body cut short, or an object deleted
or replaced between its listing and its read."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from boto3.s3.transfer import TransferConfig
from conftest import ROOT, SECRET, counts, query, run_cli, s3_env, valid_table, with_values

from pipeline.common.errors import BucketError
from pipeline.ingest.from_bucket import listing_start
from pipeline.ingest.object_store import parse_uri
from pipeline.ingest.s3_store import S3Store

AS_OF = "2026-12-02T12:00:00"
SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


def put(s3, bucket: str, key: str, table: pa.Table | bytes, tmp_path: Path, multipart: bool = False) -> None:
    if isinstance(table, bytes):
        s3.put_object(Bucket=bucket, Key=key, Body=table)
        return
    local = tmp_path / f"upload-{uuid.uuid4().hex}.parquet"
    pq.write_table(table, local, compression="none" if multipart else "snappy")
    config = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    s3.upload_file(str(local), bucket, key, Config=config)


def ingest(uri: str, db: Path, endpoint: str, *more: str, env: dict[str, str] | None = None):
    return run_cli("ingest", uri, "--db", str(db), "--as-of", AS_OF, *more, env={**s3_env(endpoint), **(env or {})})


def ingest_json(uri: str, db: Path, endpoint: str, *more: str, env: dict[str, str] | None = None) -> dict:
    done = ingest(uri, db, endpoint, "--json", *more, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class S3Proxy:
    """Forwards every request to the S3 server; `fault(method, path)` may answer instead: 503 (SlowDown), "cut"
    (the headers of the real answer and half its body, then a closed connection), or a callable run first."""

    def __init__(self, upstream: str, fault: Callable[[str, str], object]):
        host, port = upstream.removeprefix("http://").split(":")
        self.requests: list[tuple[str, str]] = []
        lock, requests = threading.Lock(), self.requests

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    requests.append((self.command, self.path))
                    action = fault(self.command, self.path)
                if action == 503:
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOW_DOWN)))
                    self.end_headers()
                    self.wfile.write(SLOW_DOWN)
                    return
                if callable(action):
                    action()
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                conn.request(self.command, self.path, body=body or None, headers=dict(self.headers.items()))
                answer = conn.getresponse()
                payload = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if action == "cut" and len(payload) > 16:
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                else:
                    self.wfile.write(payload)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _first(n: int, match: Callable[[str, str], bool], answer: object = 503) -> Callable[[str, str], object]:
    """A fault: `answer` to the first n requests that `match`, then forward."""
    seen = {"n": 0}

    def fault(method: str, path: str) -> object:
        if match(method, path) and seen["n"] < n:
            seen["n"] += 1
            return answer
        return None

    return fault


def _is_listing(method: str, path: str) -> bool:
    return method == "GET" and "list-type=2" in path


def _is_object_get(method: str, path: str) -> bool:
    return method == "GET" and path.split("?")[0].endswith(".parquet")


# --- the listing's starting point ----------------------------------------------------------------------------


@pytest.mark.parametrize(("mark", "start"), [
    (None, ""),
    ("up/dt=2026-12-05/a.parquet", "up/dt=2026-12-04/"),
    ("up/dt=2026-12-05/hour=03/a.parquet", "up/dt=2026-12-04/"),
    ("up/2026-12-05/a.parquet", "up/2026-12-04/"),
    ("up/2026/12/05/a.parquet", "up/2026/12/04/"),
    ("up/year=2026/month=01/day=01/a.parquet", "up/year=2025/month=12/day=31/"),
    ("up/20260301/a.parquet", "up/20260228/"),
    ("up/app/2026-12-05/a.parquet", ""),  # a folder before the date: keys do not sort in time order
    ("up/2026-12-05T01/a.parquet", ""),  # finer than a day
    ("up/20261205.parquet", ""),  # a file, not a folder
    ("up/dt=2026-13-45/a.parquet", ""),  # not a date
    ("up/a.parquet", ""),  # no date folder: the whole prefix each time
    ("elsewhere/dt=2026-12-05/a.parquet", ""),  # a mark from another prefix says nothing
])
def test_listing_starts_a_day_before_the_date_folder_of_the_last_key(mark, start):
    assert listing_start("up/", mark) == start


def test_uris_no_store_reads_are_usage_errors_naming_what_is_read():
    done = run_cli("ingest", "wasbs://c@a.blob.core.windows.net/up/", "--db", "/tmp/never-made.duckdb")
    assert done.returncode == 2
    assert done.stderr.strip() == ("pipeline ingest: error: wasbs://c@a.blob.core.windows.net/up/: wasbs:// is not "
                                   "read; give a local folder, s3://, gs:// or az://bucket/prefix")
    done = run_cli("nightly", "--landing", "s3:///up/", "--db", "/tmp/never-made.duckdb")
    assert done.returncode == 2
    assert "s3:///up/: no bucket named; e.g. s3://telemetry-landing/uploads/" in done.stderr
    done = run_cli("nightly", "--landing", "s3://bucket/up/", "--engine", "spark", "--db", "/tmp/never-made.duckdb")
    assert done.returncode == 2
    assert done.stderr.strip() == ("pipeline nightly: error: s3://bucket/up/: the Spark engine reads local or "
                                   "Spark-readable paths; an s3:// landing is read by the DuckDB engine (--engine "
                                   "duckdb)")
    done = run_cli("nightly", "--landing", "no-such-landing", "--db", "/tmp/never-made.duckdb")
    assert (done.returncode, done.stderr.strip()) == (2, "pipeline nightly: error: --landing no-such-landing is not "
                                                         "a folder")
    assert not Path("/tmp/never-made.duckdb").exists()


def test_a_secret_in_the_config_is_refused_without_echoing_it(tmp_path):
    config = tmp_path / "admission.yaml"
    text = (ROOT / "gates" / "admission.yaml").read_text()
    config.write_text(text.replace('  region: ""', f'  region: ""\n  aws_secret_access_key: "{SECRET}"'))
    done = run_cli("ingest", "s3://b/up/", "--db", str(tmp_path / "t.duckdb"), "--config", str(config))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"pipeline ingest: error: {config}: landing.aws_secret_access_key: credentials never go in this file (it is "
        "committed); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or use an instance role")
    assert SECRET not in done.stderr + done.stdout


# --- against the server --------------------------------------------------------------------------------------


def test_ingest_from_a_bucket_counts_exactly_and_a_rerun_fetches_nothing(s3, bucket, s3_endpoint, tmp_path):
    big = valid_table(60_000, seed=1)  # uncompressed, > 5 MB: a two-part multipart upload
    bad = with_values(with_values(valid_table(300, seed=2), 0, route="teleport"), 5, total_ms=-1.0)
    put(s3, bucket, "up/dt=2026-12-01/big.parquet", big, tmp_path, multipart=True)
    put(s3, bucket, "up/dt=2026-12-01/a.parquet", valid_table(1_000, seed=3), tmp_path)
    put(s3, bucket, "up/dt=2026-12-02/bad-rows.parquet", bad, tmp_path)
    put(s3, bucket, "up/dt=2026-12-02/notes.csv", b"a,b\n1,2\n", tmp_path)
    put(s3, bucket, "up/_SUCCESS", b"", tmp_path)
    put(s3, bucket, "up/_temporary/0/part-0.parquet", b"half written", tmp_path)
    put(s3, bucket, "elsewhere/x.parquet", valid_table(10, seed=4), tmp_path)
    db = tmp_path / "t.duckdb"

    first = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)
    assert (first["files"], first["loaded_files"], first["rows_read"]) == (3, 3, 61_300)
    assert (first["accepted"], first["quarantined"], first["duplicates"]) == (61_298, 2, 0)
    assert first["sources"] == [{"uri": f"s3://{bucket}/up/", "start_after": "", "listed": 3, "already_read": 0,
                                 "not_parquet": 1, "not_parquet_examples": [f"s3://{bucket}/up/dt=2026-12-02/notes.csv"],
                                 "last_key": "up/dt=2026-12-02/bad-rows.parquet"}]
    assert sorted(f["path"] for f in first["per_file"]) == [
        f"s3://{bucket}/up/dt=2026-12-01/a.parquet", f"s3://{bucket}/up/dt=2026-12-01/big.parquet",
        f"s3://{bucket}/up/dt=2026-12-02/bad-rows.parquet"]
    assert counts(db)["events"] == 61_298 and counts(db)["quarantine"] == 2
    objects = dict(query(db, "SELECT key, etag FROM landed_objects"))
    assert objects["up/dt=2026-12-01/big.parquet"].endswith('-2"')  # a multipart upload's ETag
    assert not objects["up/dt=2026-12-01/a.parquet"].endswith('-2"')
    assert query(db, "SELECT path FROM files ORDER BY file_id")[0][0].startswith(f"s3://{bucket}/up/")

    again = ingest(f"s3://{bucket}/up/", db, s3_endpoint)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:3] == [
        f"s3://{bucket}/up/: listed 3 Parquet objects (from after 'up/dt=2026-12-01/'): 0 fetched, 3 read before; "
        "1 not Parquet (not read)",
        "0 files: 0 loaded, 0 rejected, 0 already ingested",
        "0 rows read: 0 accepted, 0 quarantined, 0 duplicates"]
    assert counts(db)["events"] == 61_298


def test_new_bytes_under_a_known_key_are_read_again_and_deduplicated(s3, bucket, s3_endpoint, tmp_path):
    v1 = valid_table(100, seed=5)
    v2 = pa.concat_tables([v1, valid_table(50, seed=6)])  # the same 100 events and 50 new ones
    put(s3, bucket, "up/dt=2026-12-01/device.parquet", v1, tmp_path)
    db = tmp_path / "t.duckdb"
    assert ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)["accepted"] == 100
    put(s3, bucket, "up/dt=2026-12-01/device.parquet", v2, tmp_path)
    second = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)
    assert (second["loaded_files"], second["rows_read"], second["accepted"], second["duplicates"]) == (1, 150, 50, 100)
    assert counts(db)["events"] == counts(db)["distinct_ids"] == 150
    assert query(db, "SELECT count(*) FROM landed_objects") == [(2,)]
    third = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)
    assert (third["files"], third["sources"][0]["already_read"]) == (0, 1)


def test_the_listing_resumes_a_day_before_the_newest_date_folder_and_relist_finds_late_objects(s3, bucket,
                                                                                                 s3_endpoint, tmp_path):
    put(s3, bucket, "up/dt=2026-11-29/a.parquet", valid_table(10, seed=7), tmp_path)
    put(s3, bucket, "up/dt=2026-12-01/b.parquet", valid_table(20, seed=8), tmp_path)
    db = tmp_path / "t.duckdb"
    assert ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)["accepted"] == 30
    put(s3, bucket, "up/dt=2026-12-01/c.parquet", valid_table(40, seed=9), tmp_path)  # more in the newest folder
    put(s3, bucket, "up/dt=2026-11-30/d.parquet", valid_table(5, seed=12), tmp_path)  # late, within the lookback
    put(s3, bucket, "up/dt=2026-11-29/late.parquet", valid_table(80, seed=10), tmp_path)  # late, before it
    second = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)
    assert second["sources"][0]["start_after"] == "up/dt=2026-11-30/"
    assert (second["sources"][0]["listed"], second["sources"][0]["already_read"], second["accepted"]) == (3, 1, 45)
    relisted = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint, "--relist")
    assert relisted["sources"][0]["start_after"] == ""
    assert (relisted["sources"][0]["listed"], relisted["sources"][0]["already_read"]) == (5, 4)
    assert [f["path"] for f in relisted["per_file"]] == [f"s3://{bucket}/up/dt=2026-11-29/late.parquet"]
    assert relisted["accepted"] == 80 and counts(db)["events"] == 155


def test_a_corrupt_object_is_rejected_with_its_reason_and_not_fetched_again(s3, bucket, s3_endpoint, tmp_path):
    put(s3, bucket, "up/dt=2026-12-01/good.parquet", valid_table(30, seed=11), tmp_path)
    put(s3, bucket, "up/dt=2026-12-01/broken.parquet", b"PAR1 this is not a parquet file at all PAR1", tmp_path)
    put(s3, bucket, "up/dt=2026-12-01/table.parquet", b"event_id,release\n1,4.12\n", tmp_path)
    db = tmp_path / "t.duckdb"
    done = ingest(f"s3://{bucket}/up/", db, s3_endpoint)
    assert done.returncode == 4, done.stderr  # a rejected object: the data-quality alarm
    lines = done.stdout.splitlines()
    assert lines[1] == "3 files: 1 loaded, 2 rejected, 0 already ingested"
    rejected = [line for line in lines if line.startswith("  rejected")]
    assert rejected[0].startswith(f"  rejected s3://{bucket}/up/dt=2026-12-01/broken.parquet: not a readable "
                                  "Parquet file: ")
    assert rejected[1] == (f"  rejected s3://{bucket}/up/dt=2026-12-01/table.parquet: not a readable Parquet file: "
                           "Parquet magic bytes not found in footer. Either the file is corrupted or this is not a "
                           "parquet file.")
    assert "pipeline-landing-" not in done.stdout  # a message names the object, never its local copy
    assert query(db, "SELECT status, count(*) FROM landed_objects GROUP BY ALL ORDER BY 1") == [
        ("loaded", 1), ("rejected", 2)]
    again = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)
    assert (again["files"], again["sources"][0]["already_read"]) == (0, 3)


def test_503s_and_a_body_cut_short_are_retried_to_exact_counts(s3, bucket, s3_endpoint, tmp_path):
    for i in range(4):
        put(s3, bucket, f"up/dt=2026-12-01/f{i}.parquet", valid_table(250, seed=20 + i), tmp_path)
    listing_503s, get_503s, cut = _first(2, _is_listing), _first(3, _is_object_get), _first(1, _is_object_get, "cut")
    proxy = S3Proxy(s3_endpoint, lambda m, p: listing_503s(m, p) or get_503s(m, p) or cut(m, p))
    try:
        db = tmp_path / "t.duckdb"
        done = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint, env={"AWS_ENDPOINT_URL_S3": proxy.url})
    finally:
        proxy.close()
    assert (done["loaded_files"], done["rows_read"], done["accepted"]) == (4, 1_000, 1_000)
    assert counts(db)["events"] == counts(db)["distinct_ids"] == 1_000
    assert sum(_is_listing(*r) for r in proxy.requests) == 3  # two 503s, then the listing
    assert sum(_is_object_get(*r) for r in proxy.requests) == 4 + 3 + 1


def test_a_store_that_stays_down_fails_within_the_deadline_naming_the_bucket(s3, bucket, s3_endpoint, tmp_path):
    config = tmp_path / "admission.yaml"
    config.write_text((ROOT / "gates" / "admission.yaml").read_text().replace(
        "  retry_seconds: 120 ", "  retry_seconds: 1 "))
    proxy = S3Proxy(s3_endpoint, lambda m, p: 503)
    try:
        done = ingest(f"s3://{bucket}/up/", tmp_path / "t.duckdb", s3_endpoint, "--config", str(config),
                      env={"AWS_ENDPOINT_URL_S3": proxy.url})
    finally:
        proxy.close()
    assert done.returncode == 2
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith(f"pipeline ingest: error: listing s3://{bucket}/up/: still failing after ")
    assert message.endswith(" tries in 1 s (landing.retry_seconds): SlowDown (HTTP 503): Please reduce your "
                            "request rate.")
    assert "Traceback" not in done.stderr and SECRET not in done.stderr


def test_a_missing_bucket_fails_at_once_naming_it(s3, s3_endpoint, tmp_path):
    done = ingest("s3://no-such-landing-bucket/up/", tmp_path / "t.duckdb", s3_endpoint)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "pipeline ingest: error: listing s3://no-such-landing-bucket/up/: NoSuchBucket (HTTP 404): The specified "
        "bucket does not exist")
    assert SECRET not in done.stderr


def test_objects_deleted_or_replaced_after_the_listing(s3, bucket, s3_endpoint, tmp_path):
    put(s3, bucket, "up/dt=2026-12-01/gone.parquet", valid_table(10, seed=30), tmp_path)
    put(s3, bucket, "up/dt=2026-12-01/kept.parquet", valid_table(20, seed=31), tmp_path)
    put(s3, bucket, "up/dt=2026-12-01/swapped.parquet", valid_table(30, seed=32), tmp_path)
    newer = valid_table(45, seed=33)

    def between_list_and_read(method: str, path: str) -> object:
        if method == "GET" and path.endswith("/gone.parquet"):
            return lambda: s3.delete_object(Bucket=bucket, Key="up/dt=2026-12-01/gone.parquet")
        if method == "GET" and path.endswith("/swapped.parquet") and not swapped:
            swapped.append(True)
            return lambda: put(s3, bucket, "up/dt=2026-12-01/swapped.parquet", newer, tmp_path)
        return None

    swapped: list[bool] = []
    proxy = S3Proxy(s3_endpoint, between_list_and_read)
    db = tmp_path / "t.duckdb"
    try:
        done = ingest(f"s3://{bucket}/up/", db, s3_endpoint, env={"AWS_ENDPOINT_URL_S3": proxy.url})
    finally:
        proxy.close()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1:3] == ["3 files: 2 loaded, 0 rejected, 0 already ingested, 1 vanished",
                          "65 rows read: 65 accepted, 0 quarantined, 0 duplicates"]
    assert f"  vanished s3://{bucket}/up/dt=2026-12-01/gone.parquet: deleted after it was listed; not read" in lines
    # the swapped object is known by what was read: the next listing shows that ETag, and nothing is fetched
    again = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)
    assert (again["files"], again["sources"][0]["listed"], again["sources"][0]["already_read"]) == (0, 2, 2)
    assert counts(db)["events"] == 65


def test_objects_whose_record_was_lost_are_fetched_again_and_never_counted_twice(s3, bucket, s3_endpoint,
                                                                                 tmp_path):
    """A run killed after storing a chunk's files and before recording its objects: the next run fetches them
    again, and their sha256 says they were stored."""
    put(s3, bucket, "up/dt=2026-12-01/a.parquet", valid_table(70, seed=40), tmp_path)
    db = tmp_path / "t.duckdb"
    ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)
    import duckdb

    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM landed_objects; DELETE FROM landing_marks")
    again = ingest_json(f"s3://{bucket}/up/", db, s3_endpoint)
    assert [(f["status"], f["accepted"]) for f in again["per_file"]] == [("skipped", 0)]
    assert counts(db)["events"] == 70 and counts(db)["files_loaded"] == 1
    assert query(db, "SELECT status FROM landed_objects") == [("skipped",)]


def test_a_listing_page_that_fails_is_asked_for_again_with_its_token(s3, bucket, s3_endpoint):
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"up/k{i}.parquet", Body=b"x")
    second_page = _first(2, lambda m, p: _is_listing(m, p) and "continuation-token" in p)
    proxy = S3Proxy(s3_endpoint, second_page)
    try:
        store = S3Store(parse_uri(f"s3://{bucket}/up/"), endpoint_url=proxy.url, retry_seconds=30, list_page=2)
        keys = [o.key for page in store.pages() for o in page]
    finally:
        proxy.close()
    assert keys == [f"up/k{i}.parquet" for i in range(5)]
    assert sum(_is_listing(m, p) for m, p in proxy.requests) == 3 + 2  # 3 pages, the second asked for 3 times


def test_no_retry_left_names_the_object(s3, bucket, s3_endpoint, tmp_path):
    proxy = S3Proxy(s3_endpoint, lambda m, p: 503)
    try:
        store = S3Store(parse_uri(f"s3://{bucket}/up/"), endpoint_url=proxy.url, retry_seconds=0)
        with pytest.raises(BucketError) as failed:
            store.fetch("up/k0.parquet", tmp_path / "x.parquet")
    finally:
        proxy.close()
    assert str(failed.value) == (f"s3://{bucket}/up/k0.parquet: still failing after 1 tries in 0 s "
                                 "(landing.retry_seconds): SlowDown (HTTP 503): Please reduce your request rate.")


def test_nightly_reads_a_bucket_landing(s3, bucket, s3_endpoint, tmp_path):
    for path in sorted((ROOT / "sample_logs").rglob("*.parquet")):
        s3.upload_file(str(path), bucket, f"up/dt=2026-12-01/{path.parent.name}-{path.name}")
    s3.put_object(Bucket=bucket, Key="up/dt=2026-12-01/export.csv", Body=b"a,b\n")
    db = tmp_path / "t.duckdb"
    done = run_cli("nightly", "--landing", f"s3://{bucket}/up/", "--db", str(db), "--as-of", "2026-12-01",
                   "--json", env=s3_env(s3_endpoint))
    assert done.returncode == 4, done.stderr  # the data-quality exit: a CSV lies in the landing
    run = json.loads(done.stdout)
    assert run["status"] == "ok"
    assert run["steps"]["ingest"]["loaded_files"] == 4 and run["steps"]["ingest"]["rows_read"] == 36_000
    assert run["data_quality"] == [f"1 file in s3://{bucket}/up/ are not Parquet and were not read (e.g. "
                                   f"export.csv); convert them: duckdb -c \"COPY (FROM read_csv_auto('s3://{bucket}/"
                                   f"up/dt=2026-12-01/export.csv')) TO 's3://{bucket}/up/dt=2026-12-01/export.parquet'"
                                   " (FORMAT parquet)\""]
    local = tmp_path / "local.duckdb"
    assert run_cli("nightly", "--landing", str(ROOT / "sample_logs"), "--db", str(local), "--as-of",
                   "2026-12-01").returncode == 0
    assert query(db, "SELECT count(*), sum(total_ms) FROM events") == query(local, "SELECT count(*), sum(total_ms) "
                                                                                   "FROM events")


def test_the_ingest_schema_lists_every_file_status():
    from pipeline.ingest.results import STATUSES

    schema = json.loads((ROOT / "schemas" / "output" / "ingest.schema.json").read_text())
    assert schema["properties"]["per_file"]["items"]["properties"]["status"]["enum"] == list(STATUSES)
