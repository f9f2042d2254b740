"""What publishing a snapshot for readers costs (pipeline/warehouse/snapshots.py), against DuckDB doing it by hand.

For each warehouse file given (bench/warehouse.py builds and caches them in bench/out/): the pipeline's
publish (every table but the raw rows, fsynced, renamed into `<db>.snapshots/`): the first one built whole,
then one built from the previous snapshot (no roll-up day changed); beside DuckDB's own `COPY FROM DATABASE`
into a new file, of every table and of every table but the raw events, and a byte copy of the file (how
snapshots were made before issue 44); the sizes; and `pipeline gate --dry-run` on the snapshot beside the same
on the warehouse.

    python bench/snapshots.py bench/out/warehouse-5000000-18000-fresh.duckdb bench/out/warehouse-20000000-18000.duckdb
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.warehouse import snapshots  # noqa: E402


def by_hand(db: Path, target: Path, skip: tuple[str, ...]) -> float:
    """DuckDB copying the warehouse's tables into a new database file."""
    target.unlink(missing_ok=True)
    start = time.perf_counter()
    con = duckdb.connect()
    con.execute("ATTACH $p AS src (READ_ONLY)", {"p": str(db)})
    con.execute("ATTACH $p AS snap", {"p": str(target)})
    if not skip:
        con.execute("COPY FROM DATABASE src TO snap")
    else:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'src'")
                  .fetchall()]
        for table in tables:
            if table not in skip:
                con.execute(f"CREATE TABLE snap.{table} AS SELECT * FROM src.{table}")
    con.execute("DETACH snap")
    con.close()
    return time.perf_counter() - start


def gate(db: Path, as_of: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipeline", "gate", "--release", "4.12", "--db", str(db),
                           "--as-of", as_of, "--dry-run", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode in (0, 1, 3), done.stderr
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path, nargs="+")
    ap.add_argument("--repeat", type=int, default=3, help="each step N times; the fastest counts")
    args = ap.parse_args()
    os.environ.pop(snapshots.KEEP_ENV, None)
    for db in args.db:
        events = duckdb.connect(str(db), read_only=True)
        n, last = events.execute("SELECT count(*), max(event_time)::DATE + 1 FROM events").fetchone()
        events.close()
        size = db.stat().st_size / 1e6
        pipe, again, whole, lean, copy = [], [], [], [], []
        hand_file = db.with_name(db.name + ".by-hand")
        for _ in range(args.repeat):
            shutil.rmtree(snapshots.folder(db), ignore_errors=True)
            start = time.perf_counter()
            published = snapshots.publish(db)
            pipe.append(time.perf_counter() - start)
            start = time.perf_counter()
            published = snapshots.publish(db)
            again.append(time.perf_counter() - start)
            start = time.perf_counter()
            shutil.copyfile(db, hand_file)
            copy.append(time.perf_counter() - start)
            whole.append(by_hand(db, hand_file, ()))
            whole_mb = hand_file.stat().st_size / 1e6
            lean.append(by_hand(db, hand_file, ("events", "quarantine")))
            lean_mb = hand_file.stat().st_size / 1e6
        hand_file.unlink()
        live, snap = min(gate(db, str(last)) for _ in range(2)), min(gate(published.path, str(last)) for _ in range(2))
        p, a, c, w, l_ = min(pipe), min(again), min(copy), min(whole), min(lean)
        print(f"{db.name}: {n:,} events, {size:,.0f} MB")
        print(f"  publish, whole                 {p:6.2f} s  {published.path.stat().st_size / 1e6:7,.0f} MB "
              f"({published.path.stat().st_size / 1e6 / size:.0%} of the file)")
        print(f"  publish, from the previous     {a:6.2f} s")
        print(f"  byte copy of the file          {c:6.2f} s  {size:7,.0f} MB   publish (previous)/copy {a / c:.2f}")
        print(f"  COPY FROM DATABASE, all tables {w:6.2f} s  {whole_mb:7,.0f} MB")
        print(f"  the same without raw events    {l_:6.2f} s  {lean_mb:7,.0f} MB   publish (whole)/hand {p / l_:.2f}")
        print(f"  gate --dry-run: warehouse {live:.2f} s, snapshot {snap:.2f} s (ratio {snap / live:.2f})")
        shutil.rmtree(snapshots.folder(db))


if __name__ == "__main__":
    main()
