"""Where the gate's window quantiles come from: the estimator named in every gate output.

- exact (`gate/segment_quantiles.sql`): quantile_cont (DuckDB) or percentile (Spark) over the window's raw
  events. The default on DuckDB: small installs, exact figures.
- log_histogram (`gate/segment_histograms.sql`): the daily log-bucket histograms of the rollup, merged over
  the window's days (pipeline/warehouse/sketch.py), within engine.sketch_relative_error of the exact figures; the
  intervals are widened by that error. The default on Spark: exact percentiles keep every distinct value per
  group and do not scale to 14 days of a billion rows a day. Whole UTC days only: the gate's window ends at
  the start of the as-of day when the sketch is used.

Both give rows of the same shape: side, task, device_tier, network_bucket, level, and per figure `<figure>_p95`
(quantile_cont) and `<figure>_grid` (quantile_disc over stats.QUANTILE_GRID: true order statistics).
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, time
from typing import Any

from pipeline.common.config import Config
from pipeline.common.errors import UsageError
from pipeline.common.registry import GATES
from pipeline.gate import stats
from pipeline.warehouse import sketch, sqlfiles
from pipeline.warehouse.engine import SKETCH, engine_name, quantile_estimator

__all__ = ["SKETCH", "QUANTILES_SQL", "HISTOGRAMS_SQL", "engine_name", "estimator", "segment_quantiles", "window_end"]
QUANTILES_SQL = "gate/segment_quantiles"
HISTOGRAMS_SQL = "gate/segment_histograms"

FIGURES = tuple(g.figure for g in GATES if g.kind == "p95_budget")  # the SQL figures the p95 budgets read
P95 = 0.95  # the quantile every budget is on: p95 <= budget <=> share of values above it <= 5 %
_KEY = ("side", "task", "device_tier", "network_bucket", "level")


def estimator(engine: Any, config: Config) -> str:
    return quantile_estimator(engine, config)


def window_end(as_of: datetime, estimator_name: str) -> datetime:
    """The sketch reads whole days: its window ends at the start of the as-of day (as_of itself at midnight)."""
    if estimator_name == SKETCH:
        return datetime.combine(as_of.date(), time())
    return as_of


def segment_quantiles(engine: Any, params: dict[str, Any], config: Config) -> list[dict]:
    """The quantile rows the gate reads, from the estimator the config picks for this engine: per figure its
    p95 (`<figure>_p95`, as quantile_cont) and its order statistics over stats.QUANTILE_GRID (`<figure>_grid`,
    as quantile_disc)."""
    if estimator(engine, config) != SKETCH:
        return sqlfiles.dicts(engine, QUANTILES_SQL, {**params, "fractions": stats.QUANTILE_GRID})
    require_fresh_rollup(engine, config)
    groups: dict[tuple, dict[str, tuple[list[int], list[int]]]] = {}
    for row in sqlfiles.dicts(engine, HISTOGRAMS_SQL, params):
        key = tuple(row[k] for k in _KEY)
        buckets, counts = groups.setdefault(key, {}).setdefault(row["figure"], ([], []))
        buckets.append(row["bin"])
        counts.append(row["n"])
    e = config.engine.sketch_relative_error
    out = []
    for key, figures in groups.items():
        row = dict(zip(_KEY, key, strict=True))
        for name in FIGURES:
            buckets, counts = figures.get(name, ([], []))
            p95 = sketch.quantiles(buckets, counts, [P95], e) if buckets else None
            row[f"{name}_p95"] = p95[0] if p95 else None
            row[f"{name}_grid"] = sketch.order_statistics(buckets, counts, stats.QUANTILE_GRID, e) if buckets else None
        out.append(row)
    return out


@contextmanager
def _bookkeeping(engine: Any):
    """The DuckDB connection that holds the rollup's state: the engine's own, or Spark's bookkeeping file."""
    if engine_name(engine) == "spark":
        from pipeline.warehouse import db

        with db.reading(engine.db_path) as con:
            yield con
    else:
        yield getattr(engine, "con", engine)


def require_fresh_rollup(engine: Any, config: Config) -> None:
    """The sketch is only as current as the rollup: refuse, saying what to run, when files were loaded after the
    last refresh or the rollup was built with other settings (network buckets, sketch error)."""
    from pipeline.warehouse.aggregate import settings_digest

    with _bookkeeping(engine) as con:
        last, digest, newest, stale = sqlfiles.run(con, "rollups/freshness").fetchone()
    fix = f"run: pipeline aggregate --engine {engine_name(engine)}" + (
        f" --config {config.source}" if config.source else "")
    if last is None:
        raise UsageError(f"the gate reads its p95s from the rollup's histograms (engine.quantiles: sketch), and "
                         f"there is no rollup yet; {fix}")
    if digest != settings_digest(config, engine_name(engine)):
        raise UsageError("the rollup's histograms were built with other settings (network buckets or "
                         f"engine.sketch_relative_error) than {config.source or 'this config'}; {fix}")
    if newest > last or stale:
        raise UsageError(f"the rollup is behind the events (files up to id {last} folded in, {newest} loaded); {fix}")
