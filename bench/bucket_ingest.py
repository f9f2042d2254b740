"""Bucket landing benchmark: the same Parquet files ingested from local disk and from each object store's
server: moto's S3, gcp-storage-emulator's GCS, Azurite's Azure Blob.

    .venv/bin/python bench/bucket_ingest.py [--rows 1000000] [--objects 200] [--repeat 2] [--stores s3,gs,az]

Writes the files once (bench/out/land-<rows>-<objects>/, as bench/ingest.py does), then in the same run, each
in its own process with its own peak RSS (best of --repeat):
  by hand: DuckDB loading the files from disk (bench/ingest.py's INSERT ... SELECT with the row rules)
  disk:    `pipeline ingest <folder>`
  s3, gs, az: each store's server started on 127.0.0.1 (a free port), the files uploaded under
           <scheme>://bench-landing/up/dt=2026-12-01/ with the platform's client, then `pipeline ingest <uri>`
           (list, fetch 8 at a time into the spool, then as disk)
Prints time and peak RSS of each and the ratios store / disk (targets: time <= 2, peak RSS <= 1.2) and each
against by hand. The servers run on the same 2 cores and compete with the ingest. Azurite comes from
tests/system-packages (npm, into .tools/).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import timed
from ingest import BY_HAND, OUT, _landing

BUCKET = "bench-landing"
ROOT = Path(__file__).resolve().parent.parent
AZURITE = ROOT / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="  # published


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd: list[str], port: int, name: str) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=OUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                sys.exit(f"{name} did not start (make test installs what the benchmarks need)")
            time.sleep(0.2)


def _s3() -> tuple[subprocess.Popen, Callable[[Path, str], None]]:
    port = _free_port()
    proc = _start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port, "moto's S3 server")
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
                       "AWS_EC2_METADATA_DISABLED": "true"})
    import boto3
    from botocore.config import Config

    s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}, max_pool_connections=8))
    s3.create_bucket(Bucket=BUCKET)
    return proc, lambda f, key: s3.upload_file(str(f), BUCKET, key)


def _gs() -> tuple[subprocess.Popen, Callable[[Path, str], None]]:
    port = _free_port()
    proc = _start([sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(port),
                   "--in-memory"], port, "gcp-storage-emulator")
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
    from google.cloud import storage

    bucket = storage.Client(project="bench").create_bucket(BUCKET)
    return proc, lambda f, key: bucket.blob(key).upload_from_filename(str(f))


def _az() -> tuple[subprocess.Popen, Callable[[Path, str], None]]:
    port = _free_port()
    proc = _start([str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
                   "--skipApiVersionCheck", "--silent"], port, "Azurite")
    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;")
    from azure.storage.blob import BlobServiceClient

    container = BlobServiceClient.from_connection_string(os.environ["AZURE_STORAGE_CONNECTION_STRING"]) \
        .create_container(BUCKET)

    def upload(f: Path, key: str) -> None:
        with f.open("rb") as data:
            container.upload_blob(key, data)

    return proc, upload


STORES = {"s3": _s3, "gs": _gs, "az": _az}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--stores", default="s3,gs,az", help="which stores, of s3, gs, az")
    args = ap.parse_args()
    land = _landing(args.rows, args.objects, 0)
    files = sorted(land.rglob("*.parquet"))
    size = sum(f.stat().st_size for f in files)

    def best(name: str, cmd: list[str]) -> tuple[float, float]:
        runs = []
        for i in range(args.repeat):
            for stale in OUT.glob(f"bench-bucket-{name}.duckdb*"):
                shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
            db = str(OUT / f"bench-bucket-{name}.duckdb")
            run = timed([part.replace("{db}", db) for part in cmd])
            if name != "by-hand":
                done = json.loads(run.stdout)
                assert done["accepted"] == args.rows, f"{name} accepted {done['accepted']} of {args.rows} rows"
            runs.append(run)
            print(f"  {name:<8} run {i + 1}: {run.seconds:6.2f} s  peak RSS {run.rss_mb:,.0f} MB", flush=True)
        return min(r.seconds for r in runs), min(r.rss_mb for r in runs)

    pipeline = [sys.executable, "-m", "pipeline", "ingest", "--json", "--db", "{db}"]
    hand_s, hand_mb = best("by-hand", [sys.executable, "-c", BY_HAND, "{db}", *map(str, files)])
    disk_s, disk_mb = best("disk", [*pipeline, str(land)])
    results = {}
    for scheme in args.stores.split(","):
        server, upload = STORES[scheme]()
        try:
            started = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda f, put=upload: put(f, f"up/dt=2026-12-01/{f.name}"), files))
            print(f"{scheme}: uploaded {len(files)} objects ({size / 2**20:.1f} MB, {args.rows:,} rows) in "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
            results[scheme] = best(scheme, [*pipeline, f"{scheme}://{BUCKET}/up/"])
        finally:
            server.kill()
            server.wait()
    print(f"by hand: {hand_s:6.2f} s  peak RSS {hand_mb:,.0f} MB")
    print(f"disk:    {disk_s:6.2f} s  peak RSS {disk_mb:,.0f} MB  ({disk_s / hand_s:.2f}x by hand)")
    for scheme, (took, mb) in results.items():
        print(f"{scheme + ':':<8} {took:6.2f} s  peak RSS {mb:,.0f} MB  ({took / hand_s:.2f}x by hand); / disk: "
              f"time {took / disk_s:.2f} (target <= 2), peak RSS {mb / disk_mb:.2f} (target <= 1.2)")


if __name__ == "__main__":
    main()
