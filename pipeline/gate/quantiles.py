"""The window's p95s and order statistics, read from the rollup's daily log-bucket histograms (rollup_hist,
pipeline/warehouse/sketch.py) merged over the window's days: within engine.sketch_relative_error of the exact
figures, at any size, on both engines. They are for reading (the p95 shown, its interval, widened by that error)
and for the weak-network comparison of two p95s; a p95 budget is decided on the exact count of values above the
budget (rollup_device_day). Arrival lag is a histogram of the same table (figure 'lag').

Rows have the shape side, task, device_tier, network_bucket, level, and per figure `<figure>_p95` (as
quantile_cont) and `<figure>_grid` (as quantile_disc over stats.QUANTILE_GRID: order statistics).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.common.config import Config
from pipeline.common.registry import GATES
from pipeline.gate import stats
from pipeline.warehouse import sketch, sqlfiles
from pipeline.warehouse.engine import SKETCH, engine_name

__all__ = ["SKETCH", "HISTOGRAMS_SQL", "engine_name", "segment_quantiles", "arrival_lag"]
HISTOGRAMS_SQL = "gate/segment_histograms"
LAG_SQL = "gate/arrival_lag"

FIGURES = tuple(g.figure for g in GATES if g.kind == "p95_budget")  # the SQL figures the p95 budgets read
P95 = 0.95  # the quantile every budget is on: p95 <= budget <=> share of values above it <= 5 %
_KEY = ("side", "task", "device_tier", "network_bucket", "level")


def _numbers(column: pa.ChunkedArray) -> np.ndarray:
    """A numeric column without nulls as numpy, read from its buffer: pyarrow's to_numpy imports pandas (1.8 s
    here), which `pipeline gate` otherwise never needs."""
    array = column.combine_chunks()
    if array.null_count or not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        return np.array(array.to_pylist())  # a HUGEINT sum arrives as a decimal
    dtype = np.dtype(str(array.type))
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def segment_quantiles(engine: Any, params: dict[str, Any], config: Config) -> list[dict]:
    """Per side and segment (and task x bucket): each figure's p95 (`<figure>_p95`) and its order statistics over
    stats.QUANTILE_GRID (`<figure>_grid`), from the merged histograms (the SQL orders them by group and bin, so
    each group's histogram is one slice of the bin and count columns: its values and cumulative counts are
    computed for all groups at once)."""
    table = sqlfiles.arrow(engine, HISTOGRAMS_SQL, params)
    if table.num_rows == 0:
        return []
    names = (*_KEY, "figure")
    starts = _group_starts([table[k].combine_chunks() for k in names])
    at = np.asarray(starts, dtype=np.int64)  # as Arrow from its buffer: pa.array(list) would import pandas
    firsts = table.select(list(names)).take(pa.Array.from_buffers(pa.int64(), len(at), [None, pa.py_buffer(at)]))
    firsts = firsts.to_pylist()
    bins, counts = _numbers(table["bin"]), _numbers(table["n"]).astype(np.int64)
    values = sketch.bucket_values(bins, config.engine.sketch_relative_error)
    running = np.cumsum(counts)
    rows: dict[tuple, dict] = {}
    for start, end, first in zip(starts, [*starts[1:], table.num_rows], firsts, strict=True):
        key = tuple(first[k] for k in _KEY)
        row = rows.setdefault(key, {**first, **{f"{f}_{part}": None for f in FIGURES for part in ("p95", "grid")}})
        row.pop("figure", None)
        name = first["figure"]
        before = running[start - 1] if start else 0
        ends = running[start:end] - before  # the group's cumulative counts
        if name in FIGURES and ends[-1] > 0:
            row[f"{name}_p95"] = sketch.quantiles_of(values[start:end], ends, [P95])[0]
            row[f"{name}_grid"] = sketch.order_statistics_of(values[start:end], ends, stats.QUANTILE_GRID)
    return list(rows.values())


def _group_starts(columns: list[pa.Array]) -> list[int]:
    """The rows where a group begins: the first, and each whose key (the columns, a null equal to a null) differs
    from the row before it."""
    n = len(columns[0])
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for column in columns:
        this, before = column.slice(1), column.slice(0, n - 1)
        unequal = pc.not_equal(this, before)  # null where either is null: false there (no scalar: it imports pandas)
        differs = pc.or_(pc.and_kleene(unequal, pc.is_valid(unequal)), pc.xor(pc.is_null(this), pc.is_null(before)))
        flags = pc.cast(differs, pa.uint8())  # read from its buffer: to_numpy would import pandas
        change[1:] |= np.frombuffer(flags.buffers()[1], dtype=np.uint8, count=len(flags), offset=flags.offset) > 0
    return np.flatnonzero(change).tolist()


def arrival_lag(engine: Any, params: dict[str, Any], config: Config) -> dict[str, dict[str, float]] | None:
    """Hours from event_time to ingestion per network bucket: rows, median and p95 (the manifest's ingested_at);
    DuckDB only: the Spark engine keeps no per-row link to its files' ingestion time."""
    if engine_name(engine) != "duckdb":
        return None
    merged = _histograms(sqlfiles.dicts(engine, LAG_SQL, params), lambda row: row["network_bucket"])
    e = config.engine.sketch_relative_error
    out = {}
    for bucket, (buckets, counts) in sorted(merged.items()):
        median, p95 = sketch.quantiles(buckets, counts, [0.5, P95], e) or [None, None]
        out[bucket] = {"rows": int(sum(counts)), "median_hours": median, "p95_hours": p95}
    return out


def _histograms(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Hashable]) -> dict[Any, tuple[list, list]]:
    """(buckets, counts) of the histogram rows (bin, n) under each key."""
    out: dict[Any, tuple[list, list]] = {}
    for row in rows:
        buckets, counts = out.setdefault(key(row), ([], []))
        buckets.append(row["bin"])
        counts.append(row["n"])
    return out
