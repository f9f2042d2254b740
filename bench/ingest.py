"""Ingest benchmark: `pipeline ingest` beside DuckDB doing the same load by hand.

    .venv/bin/python bench/ingest.py [--rows 5000000] [--files 50]
    .venv/bin/python bench/ingest.py --small-files   # a backlog of small uploads (below)

Writes the files once (bench/out/land-<rows>-<files>/), then in the same run:
  by hand:  one DuckDB process, per file INSERT ... SELECT FROM read_parquet(f)
            WHERE <the contract's row rules written out as SQL>
  pipeline: `pipeline ingest` (hash, cast, Great Expectations on every row through its
            SQL data source on DuckDB, quarantine, dedupe, manifest, one transaction per
            file, rollup refresh)
Each runs as its own process so its peak RSS and CPU time are its own. Prints rows/s, peak RSS,
CPU seconds, the load average around the pair, and the ratio pipeline / by hand (target at 5M
rows: <= 1.5, peak RSS <= 1.5 GB; at 1M rows, where fixed costs such as importing GX weigh more:
<= 2.5).

--small-files: the same 20,000 rows as one file and as 2,000 files of 10 rows, and 100,000 rows as
10,000 files of 10 rows, each loaded by `pipeline ingest` in its own process, with DuckDB loading the
2,000 files by hand beside them. Prints time and peak RSS per run and the ratios (targets: 2,000 files
<= 3x one file, <= 0.6 GB; 10,000 files in the same memory).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from common import ROOT, timed

OUT = ROOT / "bench" / "out"

BY_HAND = r"""
import sys, duckdb
from pathlib import Path
from pipeline.warehouse.db import events_ddl
from pipeline.warehouse.schema import load_schema
db, files = sys.argv[1], sys.argv[2:]
con = duckdb.connect(db)
con.execute(events_ddl(load_schema()))
where = '''event_id IS NOT NULL AND event_time IS NOT NULL AND release IS NOT NULL AND app_version IS NOT NULL
 AND task IS NOT NULL AND route IN ('edge','cloud','edge_with_cloud_check') AND device_id IS NOT NULL
 AND device_tier IN ('low','mid','high','flagship') AND mem_class_gb IN (2,3,4,6,8,12,16,24)
 AND network_type IN ('wifi','5g','4g','3g','2g','offline','unknown') AND coalesce(rtt_ms >= 0, true)
 AND prompt_tokens >= 0 AND output_tokens >= 0 AND coalesce(ttft_ms >= 0, true)
 AND total_ms BETWEEN 0 AND 3600000 AND streamed IS NOT NULL AND coalesce(cold_start_ms >= 0, true)
 AND coalesce(resident_mem_mb >= 0, true) AND coalesce(peak_mem_mb >= 0, true)
 AND coalesce(temp_start_c BETWEEN -20 AND 90, true) AND coalesce(temp_end_c BETWEEN -20 AND 90, true)
 AND coalesce(battery_pct BETWEEN 0 AND 100, true)
 AND outcome IN ('adopted','edited','regenerated','undone','abandoned','failed')
 AND auto_fallback IS NOT NULL AND coalesce(ttft_ms <= total_ms, true)
 AND coalesce(resident_mem_mb <= peak_mem_mb, true)
 AND event_time <= now()::TIMESTAMP + INTERVAL 24 HOUR AND NOT (route = 'cloud' AND auto_fallback)'''
cols = ", ".join(load_schema().names)
for f in files:
    con.execute(f"INSERT INTO events SELECT {cols}, 0 FROM read_parquet($f) WHERE {where}", {"f": f})
print(con.execute("SELECT count(*) FROM events").fetchone()[0])
"""


def _load_average() -> str:
    """The 1-minute load average: on a shared machine it says how much the two timings competed."""
    return f"{os.getloadavg()[0]:.1f}"


def _landing(rows: int, files: int, bad_rows: int) -> Path:
    """bench/out/land-<rows>-<files>/, written once (in a child process, so this one's RSS stays small)."""
    land = OUT / f"land-{rows}-{files}"
    if not land.exists():
        seconds, *_ = timed([sys.executable, "-m", "pipeline", "simulate", "--out", str(land), "--release", "4.12",
                             "--rows", str(rows), "--files", str(files), "--seed", "1", "--bad-rows", str(bad_rows)])
        print(f"wrote {rows} rows in {files} files in {seconds:.1f} s")
    return land


def _fresh() -> None:
    for stale in OUT.glob("bench-*.duckdb*"):  # the files, their WALs and locks, and the snapshots' folder
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()


def small_files() -> None:
    _fresh()
    runs = {}
    for rows, files in ((20_000, 1), (20_000, 2_000), (100_000, 10_000)):
        land = _landing(rows, files, 0)
        db = OUT / f"bench-small-{files}.duckdb"
        runs[files] = timed([sys.executable, "-m", "pipeline", "ingest", "--json", "--db", str(db), str(land)])
        accepted = json.loads(runs[files].stdout)["accepted"]
        print(f"pipeline, {rows:>7,} rows in {files:>6,} files: {runs[files].seconds:6.1f} s  peak RSS "
              f"{runs[files].rss_mb:,.0f} MB  accepted {accepted:,}")
    paths = sorted(str(p) for p in _landing(20_000, 2_000, 0).rglob("*.parquet"))
    hand = timed([sys.executable, "-c", BY_HAND, str(OUT / "bench-small-hand.duckdb"), *paths])
    print(f"by hand,  20,000 rows in  2,000 files: {hand.seconds:6.1f} s  peak RSS {hand.rss_mb:,.0f} MB")
    print(f"ratio 2,000 files / one file: {runs[2_000].seconds / runs[1].seconds:.2f} (target <= 3); "
          f"2,000 files / by hand: {runs[2_000].seconds / hand.seconds:.2f}; peak RSS 2,000 files "
          f"{runs[2_000].rss_mb / 1024:.2f} GB (target <= 0.6), 10,000 files {runs[10_000].rss_mb / 1024:.2f} GB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--small-files", action="store_true", help="the small-files runs instead (see above)")
    args = ap.parse_args()
    if args.small_files:
        small_files()
        return
    land = _landing(args.rows, args.files, args.files * 5)
    files = sorted(str(p) for p in land.rglob("*.parquet"))
    _fresh()

    load = _load_average()
    hand_s, hand_rss, hand_out, _, hand_cpu = timed([sys.executable, "-c", BY_HAND, str(OUT / "bench-hand.duckdb"),
                                                     *files])
    pipe_s, pipe_rss, pipe_out, _, pipe_cpu = timed([sys.executable, "-m", "pipeline", "ingest", "--json",
                                        "--db", str(OUT / "bench-pipeline.duckdb"), str(land)])
    summary = json.loads(pipe_out)

    rows = args.rows
    print(f"rows: {rows} in {len(files)} files; by hand kept {int(hand_out)}, pipeline accepted "
          f"{summary['accepted']}, quarantined {summary['quarantined']}, duplicates {summary['duplicates']}")
    print(f"by hand : {hand_s:7.1f} s  {rows / hand_s:>10,.0f} rows/s  peak RSS {hand_rss:,.0f} MB  "
          f"CPU {hand_cpu:.1f} s  (load average {load} at the start, {_load_average()} at the end)")
    print(f"pipeline: {pipe_s:7.1f} s  {rows / pipe_s:>10,.0f} rows/s  peak RSS {pipe_rss:,.0f} MB  "
          f"CPU {pipe_cpu:.1f} s (CPU ratio {pipe_cpu / hand_cpu:.2f})")
    target = 1.5 if rows >= 5_000_000 else 2.5
    print(f"ratio pipeline / by hand: {pipe_s / hand_s:.2f} (target <= {target}); peak RSS {pipe_rss / 1024:.2f} GB "
          "(target <= 1.5 GB)")


if __name__ == "__main__":
    main()
