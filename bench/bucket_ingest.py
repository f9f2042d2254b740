"""s3:// landing benchmark: the same Parquet files ingested from local disk and from an S3 server.

    .venv/bin/python bench/bucket_ingest.py [--rows 1000000] [--objects 200] [--repeat 2]

Writes the files once (bench/out/land-<rows>-<objects>/, as bench/ingest.py does), starts moto's S3 server
on 127.0.0.1 (a free port), uploads them under s3://bench-landing/up/dt=2026-12-01/, then in the same run,
each in its own process with its own peak RSS (best of --repeat):
  by hand: DuckDB loading the files from disk (bench/ingest.py's INSERT ... SELECT with the row rules)
  disk:    `pipeline ingest <folder>`
  bucket:  `pipeline ingest s3://bench-landing/up/` (list, fetch 8 at a time into the spool, then as disk)
Prints time and peak RSS of each and the ratios bucket / disk (targets: time <= 2, peak RSS <= 1.2) and
each against by hand. The S3 server runs on the same 2 cores and competes with the ingest.
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
from concurrent.futures import ThreadPoolExecutor

from common import timed
from ingest import BY_HAND, OUT, _landing

BUCKET = "bench-landing"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                sys.exit("moto's S3 server did not start (pip install 'moto[server]>=5.2.5')")
            time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    land = _landing(args.rows, args.objects, 0)
    files = sorted(land.rglob("*.parquet"))
    server, endpoint = _start_server()
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": endpoint,
                       "AWS_EC2_METADATA_DISABLED": "true"})
    try:
        import boto3
        from botocore.config import Config

        s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}, max_pool_connections=8))
        s3.create_bucket(Bucket=BUCKET)
        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda f: s3.upload_file(str(f), BUCKET, f"up/dt=2026-12-01/{f.name}"), files))
        size = sum(f.stat().st_size for f in files)
        print(f"uploaded {len(files)} objects ({size / 2**20:.1f} MB, {args.rows:,} rows) in "
              f"{time.perf_counter() - started:.1f} s to {endpoint}")

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
                print(f"  {name:<8} run {i + 1}: {run.seconds:6.2f} s  peak RSS {run.rss_mb:,.0f} MB")
            return min(r.seconds for r in runs), min(r.rss_mb for r in runs)

        pipeline = [sys.executable, "-m", "pipeline", "ingest", "--json", "--db", "{db}"]
        hand_s, hand_mb = best("by-hand", [sys.executable, "-c", BY_HAND, "{db}", *map(str, files)])
        disk_s, disk_mb = best("disk", [*pipeline, str(land)])
        bucket_s, bucket_mb = best("bucket", [*pipeline, f"s3://{BUCKET}/up/"])
    finally:
        server.kill()
        server.wait()
    print(f"by hand: {hand_s:6.2f} s  peak RSS {hand_mb:,.0f} MB")
    print(f"disk:    {disk_s:6.2f} s  peak RSS {disk_mb:,.0f} MB  ({disk_s / hand_s:.2f}x by hand)")
    print(f"bucket:  {bucket_s:6.2f} s  peak RSS {bucket_mb:,.0f} MB  ({bucket_s / hand_s:.2f}x by hand)")
    print(f"ratio bucket / disk: time {bucket_s / disk_s:.2f} (target <= 2), peak RSS {bucket_mb / disk_mb:.2f} "
          "(target <= 1.2)")


if __name__ == "__main__":
    main()
