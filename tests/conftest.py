from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.warehouse.schema import load_schema

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 12, 2, 12, 0, 0)
T = TypeVar("T")
# the commands wrap to COLUMNS when it is set; pytest-xdist's workers set it to 80, a user's shell may too
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
# `make test-core`: the suite without the programs tests/system-packages installs; their tests skip, saying so
PARTIAL = os.environ.get("PIPELINE_TESTS_PARTIAL") == "1"


def program(name: str) -> str:
    """The path of a program a test drives (listed in tests/system-packages). A missing one fails the test, never
    skips it silently; under `make test-core` the test is skipped, naming the program."""
    path = shutil.which(name)
    if path:
        return path
    why = f"{name} is not installed (tests/system-packages install, which `make test` runs, installs it)"
    if PARTIAL:
        pytest.skip(why)
    pytest.fail(why, pytrace=False)


def wait_until(condition: Callable[[], T], timeout: float, what: str, every: float = 0.1) -> T:
    """Polls `condition` every `every` s until it returns something true, and returns that; fails naming `what`
    (the thing that never happened) after `timeout` s. For "wait until X has happened", instead of a fixed sleep
    that is too short on a slow machine and too long on a fast one. The condition may raise to fail at once
    (e.g. the process it watches has exited)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(every)


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now (bound, then closed): for a server a test starts, or a dead URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def valid_table(n: int, seed: int = 0, start: datetime = NOW - timedelta(days=3)) -> pa.Table:
    """n rows that satisfy every contract rule, with unique event_ids."""
    rng = np.random.default_rng(seed)
    route = rng.choice(["edge", "cloud", "edge_with_cloud_check"], n)
    edge = route != "cloud"
    ttft = rng.uniform(50, 900, n)
    resident = np.where(edge, rng.uniform(500, 900, n), np.nan)
    cols = {
        "event_id": [f"{seed:04d}-{i:08d}" for i in range(n)],
        "event_time": pa.array([start + timedelta(seconds=int(s)) for s in rng.integers(0, 86_400, n)],
                               pa.timestamp("us")),
        "release": ["4.12"] * n,
        "app_version": ["4.12.0"] * n,
        "model_id": [("m-1b-int4" if e else None) for e in edge],
        "task": rng.choice(["rewrite", "intent"], n).tolist(),
        "route": route.tolist(),
        "device_id": [f"dev{d}" for d in rng.integers(0, 500, n)],
        "device_tier": rng.choice(["low", "mid", "high", "flagship"], n).tolist(),
        "mem_class_gb": rng.choice([4, 6, 8, 12], n).astype(np.int32),
        "soc": ["snapdragon-8gen2"] * n,
        "os_version": ["android-14"] * n,
        "npu_ready": rng.random(n) < 0.7,
        "network_type": rng.choice(["wifi", "4g", "3g", "2g", "offline"], n).tolist(),
        "rtt_ms": rng.uniform(10, 900, n),
        "prompt_tokens": rng.integers(5, 300, n).astype(np.int32),
        "output_tokens": rng.integers(1, 200, n).astype(np.int32),
        "ttft_ms": ttft,
        "total_ms": ttft + rng.uniform(0, 9000, n),
        "streamed": rng.random(n) < 0.5,
        "cold_start_ms": np.where(rng.random(n) < 0.1, rng.uniform(100, 600, n), np.nan),
        "resident_mem_mb": resident,
        "peak_mem_mb": resident + rng.uniform(0, 600, n),
        "temp_start_c": rng.uniform(25, 40, n),
        "temp_end_c": rng.uniform(30, 45, n),
        "throttled": rng.random(n) < 0.05,
        "battery_pct": rng.uniform(0, 100, n),
        "outcome": rng.choice(["adopted", "edited", "abandoned", "failed"], n).tolist(),
        "auto_fallback": edge & (rng.random(n) < 0.05),
        "error_code": [None] * n,
    }
    table = pa.table(cols)
    # NaN stands for "not set" above; the contract says null
    arrays = []
    for name in table.column_names:
        arr = table[name]
        if pa.types.is_floating(arr.type):
            arr = pa.chunked_array([pa.array(arr.to_numpy(), from_pandas=True)])
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, names=table.column_names).cast(load_schema().arrow_schema())


def with_values(table: pa.Table, row: int, **values: object) -> pa.Table:
    """A copy of `table` with row `row` set to `values` (None = null)."""
    for name, value in values.items():
        col = table[name].to_pylist()
        col[row] = value
        idx = table.column_names.index(name)
        table = table.set_column(idx, name, pa.array(col, table.schema.field(name).type))
    return table


def write(table: pa.Table, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def counts(db_path: Path) -> dict[str, int]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        row = con.execute("""
            SELECT (SELECT count(*) FROM events), (SELECT count(DISTINCT event_id) FROM events),
                   (SELECT count(*) FROM quarantine), count(*) FILTER (WHERE status = 'loaded'),
                   coalesce(sum(accepted), 0), coalesce(sum(quarantined), 0), coalesce(sum(duplicates), 0),
                   coalesce(sum(rows_read), 0)
            FROM files""").fetchone()
    finally:
        con.close()
    return dict(zip(("events", "distinct_ids", "quarantine", "files_loaded", "accepted", "quarantined", "duplicates",
                     "rows_read"), row, strict=True))


def query(db_path: Path, sql: str) -> list[tuple]:
    """The rows of `sql` on the warehouse at `db_path`, read-only."""
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240,
            cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The `pipeline` command run in this process (`main(argv)`, its stdout and stderr captured), as a
    CompletedProcess; for exit codes, output and what the command stores. A test of what only a separate process
    shows (a signal, a kill, a lock held by the command itself) uses `run_process`. CI is unset unless a test
    sets it: the gate records runs under CI=true as trigger "ci", and the tests run inside CI."""
    from pipeline.cli.main import main
    from pipeline.common import logs, stopping
    from pipeline.warehouse import db

    out, err = io.StringIO(), io.StringIO()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    loggers = [logging.getLogger(name) for name in (logs.log.name, *logs.LIBRARY_LOGGERS)]
    logger_state = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    with _environment({"CI": "", **(env or {})}), contextlib.chdir(cwd), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            stopping.reset()
            db.set_busy_timeout(None)
            for lg, kept, level, propagate in logger_state:
                lg.handlers[:], lg.level, lg.propagate = kept, level, propagate
    return subprocess.CompletedProcess(["pipeline", *args], code, out.getvalue(), err.getvalue())


def run_process(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """The real `pipeline` command in a subprocess: for what only a process shows (its exit on a signal, the
    interpreter's own output, a lock or a resource limit of its own)."""
    full_env = {**os.environ, "CI": "", **(env or {})}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=ROOT)


@contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    """os.environ with `changes` for the duration (an empty value is kept as empty, as a subprocess would see it)."""
    saved = dict(os.environ)
    os.environ.update(changes)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class LocalHttp:
    """An HTTP server on 127.0.0.1 (a free port, its own thread) for webhook tests: each POST's JSON body goes to
    `post(handler, body)`, which answers through the handler; `url` ends in `path`. close() stops it."""

    def __init__(self, post: Callable[[BaseHTTPRequestHandler, dict], None], path: str):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                post(self, json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}{path}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def writer_holding(db: Path, open_file: bool = False) -> Iterator[subprocess.Popen]:
    """Another process holding the warehouse's writer lock as `pipeline nightly` (with `open_file`, the file
    read-write too), as the nightly job does while it runs; killed on leaving."""
    hold = f"    con = duckdb.connect({str(db)!r})\n" if open_file else ""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time, duckdb; from pathlib import Path\n"
         "from pipeline.warehouse.db import writer_lock\n"
         f"with writer_lock(Path({str(db)!r}), 'nightly'):\n{hold}    print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.communicate()  # waits, and closes its stdout pipe


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "telemetry.duckdb"


DEMO_AS_OF = "2026-12-01"


def demo_nightly_args(db: str = "telemetry.duckdb") -> list[str]:
    """`make demo`'s job: the bundled sample logs, judged as of a pinned day."""
    return ["nightly", "--landing", "sample_logs", "--db", db, "--as-of", DEMO_AS_OF]


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder as `make demo` leaves the repo: sample_logs/ and the telemetry.duckdb built from them."""
    import shutil

    folder = tmp_path_factory.mktemp("demo")
    shutil.copytree(ROOT / "sample_logs", folder / "sample_logs")
    (folder / "gates").mkdir()  # docs/ledger.md's example reads the example costs by this relative path
    shutil.copy(ROOT / "gates" / "costs.example.yaml", folder / "gates" / "costs.example.yaml")
    done = run_cli(*demo_nightly_args(), cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder


SECRET = "s3cr3t-never-printed"  # the moto server's secret key: no output may show it


def _serving(proc: subprocess.Popen, port: int, name: str) -> None:
    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    wait_until(up, 60, f"{name} listening")


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server (`moto[server]`, the test extra) on a free port of 127.0.0.1, for one test module."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _serving(proc, port, "moto's S3 server")
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def gcs_endpoint() -> Iterator[str]:
    """gcp-storage-emulator (the test extra), Google Cloud Storage's JSON API in memory on 127.0.0.1."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port",
                             str(port), "--in-memory"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _serving(proc, port, "gcp-storage-emulator")
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


AZURITE = ROOT / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"  # tests/system-packages puts it
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="  # published


@pytest.fixture(scope="module")
def azurite_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Azurite, Azure Blob's emulator, in memory on 127.0.0.1; the account's blob endpoint."""
    if not AZURITE.exists():
        why = "azurite is not installed (tests/system-packages install, which `make test` runs, puts it in .tools/)"
        if PARTIAL:
            pytest.skip(why)
        pytest.fail(why, pytrace=False)
    port = free_port()
    where = tmp_path_factory.mktemp("azurite")
    proc = subprocess.Popen([str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
                             "--skipApiVersionCheck", "--silent"], cwd=where,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _serving(proc, port, "Azurite")
    yield f"http://127.0.0.1:{port}/devstoreaccount1"
    proc.kill()
    proc.wait()


def azure_env(blob_endpoint: str) -> dict[str, str]:
    return {"AZURE_STORAGE_CONNECTION_STRING": f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
                                               f"AccountKey={AZURITE_KEY};BlobEndpoint={blob_endpoint};"}


def s3_env(endpoint: str) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": endpoint, "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch):
    """A plain boto3 client of the moto server, its credentials in the environment the commands see."""
    import boto3
    from botocore.config import Config as BotoConfig

    for key, value in s3_env(s3_endpoint).items():
        monkeypatch.setenv(key, value)
    return boto3.client("s3", endpoint_url=s3_endpoint, config=BotoConfig(s3={"addressing_style": "path"}))


@pytest.fixture
def bucket(s3) -> str:
    import uuid

    name = f"landing-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def interval_covers(wide, narrow) -> bool:
    """The sketch's widened interval holds the exact one (a side with no order statistic is None on both)."""
    if narrow is None:
        return wide is None
    lo_ok = narrow[0] is None or (wide[0] is not None and wide[0] <= narrow[0] + 1e-12)
    hi_ok = narrow[1] is None or (wide[1] is not None and wide[1] >= narrow[1] - 1e-12)
    return lo_ok and hi_ok
