"""Does a night cost the same after two months as after two weeks? One `pipeline nightly` per simulated day.

Each night lands one day of telemetry (--rows, a new release every 14 days, the previous one reporting a week
more, in its own landing folder), runs the real `pipeline nightly` on it (ingest, roll-ups, gate, archive), then
prints the night's wall time, the DuckDB file + WAL + snapshots, the archive (docs/archive.md) and the time of one
more snapshot publish. Beside it, DuckDB by hand: the same Parquet appended to a plain table of a file of its own
that keeps every event (what the warehouse would be without aging out).

    python bench/month.py --nights 60 --rows 200000

The acceptance of issue 44 is printed at the end: bytes added per night over the last 15 nights <= 10 % of the
first 15 nights', and the median nightly time of the last 15 nights <= 1.25x that of nights 16-30.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.planning.simulate import generate  # noqa: E402
from pipeline.warehouse import archive, snapshots  # noqa: E402

START = datetime(2026, 1, 5)
RELEASE_EVERY = 14
OVERLAP = 7  # nights the previous release keeps reporting


def releases(night: int) -> list[tuple[str, float]]:
    """The releases reporting on `night` and their shares of the night's rows."""
    k = night // RELEASE_EVERY
    current = f"5.{k}"
    if k > 0 and night % RELEASE_EVERY < OVERLAP:
        return [(current, 0.75), (f"5.{k - 1}", 0.25)]
    return [(current, 1.0)]


def land(folder: Path, night: int, rows: int) -> Path:
    day = START + timedelta(days=night)
    out = folder / f"night-{night:03d}"
    out.mkdir(parents=True)
    for release, share in releases(night):
        table = generate(release, int(rows * share), seed=night, start=day, days=1)
        pq.write_table(table, out / f"{release}-{day:%Y-%m-%d}.parquet")
    return out


def by_hand(con: duckdb.DuckDBPyConnection, landing: Path) -> float:
    start = time.perf_counter()
    files = [str(p) for p in sorted(landing.glob("*.parquet"))]
    con.execute("INSERT INTO events SELECT * FROM read_parquet($files)", {"files": files})
    con.execute("CHECKPOINT")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=60)
    ap.add_argument("--rows", type=int, default=200_000, help="rows landed per night")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "month")
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    db = args.out / "telemetry.duckdb"
    hand_db = args.out / "by-hand.duckdb"
    hand = duckdb.connect(str(hand_db))
    rows_out: list[dict] = []
    print(f"{'night':>5} {'day':>10} {'nightly s':>9} {'warehouse MB':>12} {'archive MB':>10} {'publish s':>9} "
          f"{'by hand s':>9} {'by hand MB':>10}  moved")
    for night in range(args.nights):
        landing = land(args.out / "landing", night, args.rows)
        if night == 0:
            hand.execute("CREATE TABLE events AS SELECT * FROM read_parquet($f) LIMIT 0",
                         {"f": str(next(landing.glob("*.parquet")))})
        as_of = START + timedelta(days=night + 1, hours=2)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pipeline", "nightly", "--landing", str(landing), "--db",
                               str(db), "--as-of", as_of.isoformat(), "--json"], capture_output=True, text=True,
                              cwd=ROOT)
        seconds = time.perf_counter() - start
        if done.returncode not in (0, 1, 3):
            raise SystemExit(f"night {night}: pipeline nightly exited {done.returncode}: {done.stderr[-2000:]}")
        steps = json.loads(done.stdout)["steps"]
        t = time.perf_counter()
        snapshots.publish(db)
        publish = time.perf_counter() - t
        hand_s = by_hand(hand, landing)
        row = {"night": night + 1, "day": (START + timedelta(days=night)).date().isoformat(), "nightly_s": seconds,
               "warehouse_bytes": archive.warehouse_bytes(db),
               "archive_bytes": archive.folder_bytes(Path(f"{db}.archive")), "publish_s": publish,
               "by_hand_s": hand_s, "by_hand_bytes": hand_db.stat().st_size,
               "moved": steps.get("archive", {}).get("event_rows_moved", 0)}
        rows_out.append(row)
        print(f"{row['night']:>5} {row['day']:>10} {seconds:>9.1f} {row['warehouse_bytes'] / 1e6:>12.0f} "
              f"{row['archive_bytes'] / 1e6:>10.0f} {publish:>9.2f} {hand_s:>9.2f} "
              f"{row['by_hand_bytes'] / 1e6:>10.0f}  {row['moved']:,}", flush=True)
        shutil.rmtree(landing)
    (args.out / "month.json").write_text(json.dumps(rows_out, indent=1))
    if len(rows_out) >= 45:
        sizes = [r["warehouse_bytes"] for r in rows_out]
        first = (sizes[14] - sizes[0]) / 14
        last = (sizes[-1] - sizes[-15]) / 14
        times = [r["nightly_s"] for r in rows_out]
        early, late = statistics.median(times[15:30]), statistics.median(times[-15:])
        print(f"bytes added per night: first 15 nights {first / 1e6:.1f} MB, last 15 {last / 1e6:.1f} MB "
              f"({last / first:.0%} of the first; asked <= 10%)")
        print(f"median nightly: nights 16-30 {early:.1f} s, last 15 {late:.1f} s ({late / early:.2f}x; "
              "asked <= 1.25x)")
        print(f"DuckDB by hand (no aging out): {rows_out[-1]['by_hand_bytes'] / 1e6:.0f} MB after "
              f"{len(rows_out)} nights; the warehouse {sizes[-1] / 1e6:.0f} MB with its snapshots, the archive "
              f"{rows_out[-1]['archive_bytes'] / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
