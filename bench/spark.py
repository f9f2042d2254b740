"""Spark beside DuckDB on the same landed files: rows per second per core for validation (and the whole
ingest), the rollup and the gate.

    .venv/bin/python bench/spark.py [--rows 1000000] [--files 10] [--cores 2]

Writes `rows` simulated events over 14 days into `files` Parquet files (60 % release 4.12, scenario
low_tier_memory; 40 % 4.11, postmortem; 0.2 % rows that break rules), then runs, once per engine, in this
process and timed by wall clock:
  a. ingest (read and cast, Great Expectations validation, quarantine, dedupe, store), with the GX
     validation timed on its own;
  b. a full rollup refresh: the daily rollup, its log-bucket histograms and the device-day rollup;
  c. the gate of release 4.12 (60 % of the rows), which reads only the rollups.
DuckDB uses every core and Spark local[cores] (default: every core too): rows/s/core = rows / seconds /
cores. The Spark
session's start (10-20 s, once per process) is printed but not counted in any step. Every step checks that
both engines stored the same counts and reached the same verdicts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

from common import ROOT

sys.path.insert(0, str(ROOT))

from pipeline.common.config import EngineSettings, SparkSettings, load_config  # noqa: E402
from pipeline.gate.evaluate import evaluate_gate  # noqa: E402
from pipeline.ingest.run import ingest  # noqa: E402
from pipeline.planning.simulate import write_parquet  # noqa: E402
from pipeline.warehouse import db  # noqa: E402
from pipeline.warehouse.aggregate import refresh, use_settings  # noqa: E402

OUT = ROOT / "bench" / "out" / "spark"
START = datetime(2026, 11, 17)
AS_OF = datetime(2026, 12, 1)


class Clock:
    """Seconds spent inside a wrapped function (the GX validation of either engine)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, owner: object, name: str) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(owner, name, timed)


def landing(rows: int, files: int) -> Path:
    folder = OUT / f"landing-{rows}-{files}"
    if not folder.exists():
        for release, scenario, share, seed in (("4.12", "low_tier_memory", 0.6, 1), ("4.11", "postmortem", 0.4, 2)):
            n = int(rows * share)
            write_parquet(folder, release, n, scenario, seed=seed, start=START, days=14,
                          files=max(1, round(files * share)), bad_rows=n // 500)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 2,
                    help="Spark local[N] (default: every core, as DuckDB uses)")
    args = ap.parse_args()
    land = landing(args.rows, args.files)
    work = OUT / "run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    base = load_config()
    spark_settings = SparkSettings(master=f"local[{args.cores}]", driver_memory="3g",
                                   shuffle_partitions=max(2, 2 * args.cores), warehouse=str(work / "warehouse"))
    config = dataclasses.replace(base, engine=EngineSettings(spark=spark_settings))
    results: dict[str, dict[str, float]] = {"duckdb": {}, "spark": {}}

    # ---- DuckDB
    import pipeline.ingest.validate as validate

    duck = work / "duck.duckdb"
    gx_duck = Clock()
    gx_duck.wrap(validate.Validator, "validate")
    t = time.perf_counter()
    duck_ingest = ingest(duck, [land], now=AS_OF)
    results["duckdb"]["ingest"] = time.perf_counter() - t
    results["duckdb"]["validation"] = gx_duck.seconds
    t = time.perf_counter()
    refresh(duck, config, full=True, now=AS_OF)
    results["duckdb"]["rollup"] = time.perf_counter() - t
    verdicts = {}
    t = time.perf_counter()
    with db.reading(duck) as con:
        use_settings(con, config)
        verdicts["duckdb"] = evaluate_gate(con, "4.12", config, as_of=AS_OF).verdict
    results["duckdb"]["gate"] = time.perf_counter() - t

    # ---- Spark
    from pipeline.ingest.spark import ingest_spark
    from pipeline.warehouse.spark.aggregate import refresh_spark
    from pipeline.warehouse.spark.engine import open_engine

    spark_db = work / "spark.duckdb"
    t = time.perf_counter()
    engine = open_engine(spark_db, config)
    session_start = time.perf_counter() - t
    gx_spark = Clock()
    gx_spark.wrap(validate.SparkValidator, "validate")
    t = time.perf_counter()
    spark_ingest = ingest_spark(spark_db, engine, [land], now=AS_OF)
    results["spark"]["ingest"] = time.perf_counter() - t
    results["spark"]["validation"] = gx_spark.seconds
    t = time.perf_counter()
    refresh_spark(spark_db, engine, config, full=True, now=AS_OF)
    results["spark"]["rollup"] = time.perf_counter() - t
    t = time.perf_counter()
    verdicts["spark"] = evaluate_gate(engine, "4.12", config, as_of=AS_OF).verdict
    results["spark"]["gate"] = time.perf_counter() - t
    stored = {table: sum(f.stat().st_size for f in (work / "warehouse" / table).rglob("*.parquet"))
              for table in ("events", "rollup_device_day", "rollup_hist", "rollup_daily")}

    # ---- checks and the table
    d, s = duck_ingest.to_dict(), spark_ingest.to_dict()
    same = [k for k in ("rows_read", "accepted", "quarantined", "duplicates") if d[k] != s[k]]
    if same or d["per_file"] != s["per_file"]:
        sys.exit(f"the engines stored different counts: {same or 'per file'}")
    if len(set(verdicts.values())) != 1:
        sys.exit(f"the engines reached different verdicts: {verdicts}")
    rows = d["rows_read"]
    with db.reading(duck) as con:  # the gate reads release 4.12's rows only
        gated = con.execute("SELECT count(*) FROM events WHERE release = '4.12'").fetchone()[0]
        device_days = con.execute("SELECT count(*) FROM rollup_device_day").fetchone()[0]
    print(f"{rows:,} rows in {args.files} files, 14 days; {args.cores} cores each (DuckDB: all {os.cpu_count()}, "
          f"Spark local[{args.cores}]); Spark session start {session_start:.1f} s (not counted); "
          f"verdict of 4.12 on both: {verdicts['duckdb']}")
    print(f"stored as Spark writes it: events {stored['events'] / rows:.1f} bytes per event; device-day rollup "
          f"{device_days:,} rows ({device_days / rows:.3f} per event), {stored['rollup_device_day'] / rows:.1f} bytes "
          f"per event; histograms {stored['rollup_hist'] / rows:.2f}, daily rollup {stored['rollup_daily'] / rows:.2f}")
    print(f"rows/s/core: the gate steps count release 4.12's {gated:,} rows, the others every row read")
    print(f"{'step':<28}{'DuckDB s':>10}{'rows/s/core':>14}{'Spark s':>10}{'rows/s/core':>14}{'Spark/DuckDB':>14}")
    for step in ("ingest", "validation", "rollup", "gate"):
        a, b = results["duckdb"][step], results["spark"][step]
        label = {"ingest": "ingest (all of it)", "validation": "  of which GX validation",
                 "rollup": "rollup (full, 3 tables)", "gate": "gate 4.12 (rollups)"}[step]
        n = gated if step.startswith("gate") else rows
        print(f"{label:<28}{a:>10.1f}{n / a / args.cores:>14,.0f}{b:>10.1f}{n / b / args.cores:>14,.0f}"
              f"{b / a:>14.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
