"""Ingest benchmark: `pipeline ingest` beside DuckDB doing the same load by hand.

    .venv/bin/python bench/ingest.py [--rows 5000000] [--files 50]

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
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from common import ROOT, timed

OUT = ROOT / "bench" / "out"

BY_HAND = r"""
import sys, duckdb
from pathlib import Path
from pipeline.db import events_ddl
from pipeline.schema import load_schema
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--files", type=int, default=50)
    args = ap.parse_args()
    land = OUT / f"land-{args.rows}-{args.files}"
    if not land.exists():  # in a child process, so this process's RSS stays small
        seconds, *_ = timed([sys.executable, "-m", "pipeline", "simulate", "--out", str(land), "--release", "4.12",
                               "--rows", str(args.rows), "--files", str(args.files), "--seed", "1",
                               "--bad-rows", str(args.files * 5)])
        print(f"wrote {args.rows} rows in {args.files} files in {seconds:.1f} s")
    files = sorted(str(p) for p in land.rglob("*.parquet"))
    for stale in OUT.glob("bench-*.duckdb*"):
        stale.unlink()

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
