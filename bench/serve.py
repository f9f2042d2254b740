"""`pipeline serve` under load during a nightly write (pipeline/delivery/serve.py), beside DuckDB answering the same
lookup by hand.

The demo's warehouse (`make demo`'s job into a temporary folder), served on 127.0.0.1 while another process holds
it as the nightly job does (the writer lock and the file open read-write); CLIENTS concurrent clients for SECONDS,
alternating GET /routing/4.11.json and an OFREP evaluation of edge-route-4.12. Prints per path the requests
answered, the errors, p50/p99/max latency, and beside them DuckDB reading the newest stored result of a release
by hand (one read-only query per request, as a server without the in-memory answers would).

    python bench/serve.py --seconds 30 --clients 200               # saturated: as fast as it answers
    python bench/serve.py --seconds 30 --clients 200 --rate 2000   # paced: 2,000 requests a second
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import duckdb
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from conftest import free_port, writer_holding  # noqa: E402

JSON_BODY = {"Content-Type": "application/json"}
PATHS = {"routing": ("GET", "/routing/4.11.json", None),
         "ofrep": ("POST", "/ofrep/v1/evaluate/flags/edge-route-4.12",
                   {"context": {"task": "rewrite", "device_tier": "low", "network_bucket": "weak"}})}


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 1000) - 1] if len(values) > 1 else values[0]


async def load(url: str, clients: int, seconds: float, rate: float) -> dict[str, tuple[list[float], int]]:
    """Each client on its own connection. Without `rate`, a request as soon as the last is answered (a closed
    loop: the server is kept saturated, so the latency is mostly the queue of `clients` requests in flight);
    with it, the clients together send `rate` requests a second, each on its own schedule."""
    seen: dict[str, tuple[list[float], list[int]]] = {name: ([], [0]) for name in PATHS}

    async def client(http: aiohttp.ClientSession, n: int, until: float) -> None:
        name = list(PATHS)[n % 2]
        method, path, context = PATHS[name]
        # encoded once: the clients share the server's two cores, so their own work is kept small
        body = json.dumps(context).encode() if context else None
        every = clients / rate if rate else 0.0
        next_at = time.monotonic() + every * n / clients
        while time.monotonic() < until:
            if every:
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                next_at += every
            t = time.perf_counter()
            try:
                async with http.request(method, url + path, data=body, headers=JSON_BODY if body else None) as r:
                    await r.read()
                    ok = r.status == 200
            except aiohttp.ClientError:
                ok = False
            seen[name][0].append(time.perf_counter() - t)
            seen[name][1][0] += not ok

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as http:
        until = time.monotonic() + seconds
        await asyncio.gather(*(client(http, n, until) for n in range(clients)))
    return {name: (times, errors[0]) for name, (times, errors) in seen.items()}


def by_hand(db: Path, n: int) -> list[float]:
    """DuckDB answering one lookup per request: open read-only, read the newest result, close."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        con = duckdb.connect(str(db), read_only=True)
        con.execute("SELECT result FROM evaluations WHERE release = $r ORDER BY evaluated_at DESC LIMIT 1",
                    {"r": "4.11"}).fetchone()
        con.close()
        times.append(time.perf_counter() - t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--rate", type=float, default=0, help="requests a second in all (default 0: as fast as answered)")
    ap.add_argument("--pin", action="store_true", help="the server on core 0, the clients on core 1 (as when the "
                                                        "apps are elsewhere: the load generator takes no CPU of the "
                                                        "server's)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shutil.copytree(ROOT / "sample_logs", folder / "sample_logs")
        subprocess.run([sys.executable, "-m", "pipeline", "nightly", "--landing", "sample_logs", "--db",
                        "telemetry.duckdb", "--as-of", "2026-12-01"], cwd=folder, check=True, capture_output=True)
        db = folder / "telemetry.duckdb"
        hand = by_hand(db, 300)
        port = free_port()
        if args.pin:
            os.sched_setaffinity(0, {1})
        server = subprocess.Popen([sys.executable, "-m", "pipeline", "serve", "--db", str(db), "--port", str(port)],
                                  cwd=folder, stdout=subprocess.PIPE, text=True,
                                  preexec_fn=(lambda: os.sched_setaffinity(0, {0})) if args.pin else None)
        try:
            server.stdout.readline()
            url = f"http://127.0.0.1:{port}"
            with writer_holding(db, open_file=True):
                results = uvloop.run(load(url, args.clients, args.seconds, args.rate))
        finally:
            server.terminate()
            server.wait()
    hand_p50 = statistics.median(hand)
    total = sum(len(t) for t, _ in results.values())
    pinned = " (server on core 0, clients on core 1)" if args.pin else ""
    print(f"pipeline serve{pinned}, {args.clients} clients for {args.seconds:g} s while a writer holds the warehouse: "
          f"{total / args.seconds:,.0f} requests/s")
    heads = ("answered", "errors", "p50 ms", "p99 ms", "max ms", "p99 / DuckDB p50")
    print(f"{'path':<9} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, (9, 7, 8, 8, 8, 17), strict=True)))
    for name, (times, errors) in results.items():
        p50, p99 = statistics.median(times) * 1000, quantile(times, 0.99) * 1000
        print(f"{name:<9} {len(times):>9} {errors:>7} {p50:>8.1f} {p99:>8.1f} {max(times) * 1000:>8.1f} "
              f"{p99 / 1000 / hand_p50:>16.2f}x")
    print(f"DuckDB by hand (read-only connect, newest result, close; the file not held): p50 {hand_p50 * 1000:.1f} ms, "
          f"p99 {quantile(hand, 0.99) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
