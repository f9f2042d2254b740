"""The figures the gate, the drill-down, the comparison and the routing cells share: the SQL's per-device sums
(sql/gate/segment_counts.sql, device_days.sql) and the device-level ratio read from them, with the constants
their tests share. It imports no other module of the gate package but the statistics, so each of them can
import it (tests/test_layout.py fails on a cycle inside a package)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.common.config import Config
from pipeline.gate import stats
from pipeline.warehouse import sqlfiles

COUNTS_SQL = "gate/segment_counts"
DEVICE_DAYS_SQL = "gate/device_days"
TIER_LEVEL = 5  # DEVICE_DAYS_SQL's level of a device tier's rows (grouping(task) * 4 + grouping(bucket))
# kill_rate's sequential test spreads its prior over kill rates up to 3 x the ceiling (stats.mixture_width):
# the rate worth catching is twice the ceiling, and a 1 % ceiling's default prior (20 points wide) would
# weigh rates no release survives long enough to show
KILL_MIXTURE_WIDTH = 2.0
MIN_FALLBACK_TAU = 0.02  # the fallback excess test's smallest mixing scale


def counts(con: Any, params: dict[str, Any], config: Config, by: Sequence[str] = (),
           segments: Sequence[str] = ()) -> list[dict[str, Any]]:
    """sql/gate/segment_counts.sql's rows; `by` (device dimensions) splits each segment into cells; `segments`
    (task/tier/bucket keys) reads only those segments' rows (the coarser levels then cover only them)."""
    return sqlfiles.dicts(con, COUNTS_SQL, {**params, "weight_cap": config.statistics.weight_cap(), "by": ",".join(by),
                                            "segments": ",".join(segments)})


def day_counts(con: Any, params: dict[str, Any], config: Config, by: Sequence[str] = ()) -> list[dict[str, Any]]:
    """sql/gate/device_days.sql's rows; `by` as in counts()."""
    return sqlfiles.dicts(con, DEVICE_DAYS_SQL, {**params, "kill_codes": list(config.gates.kill_rate.kill_codes),
                                                 "by": ",".join(by)})


def ratio(row: dict[str, Any], k: str, n: str, min_devices: int) -> stats.DeviceRatio:
    """The device-level ratio k / n of one SQL row (sums named as in sql/gate/segment_counts.sql): of the
    estimand's weighted sums (`<n>_w`, `<k>_w`) where the SQL has them, else of the raw counts."""
    weighted = f"{n}_w" in row
    total = float((row[f"{n}_w"] if weighted else row[n]) or 0)
    independent = float(row[f"{n}_ind"] or 0) / total if weighted and total else 1.0
    return stats.device_ratio(int(row.get(f"{n}_devices", row["devices"])), total,
                              float((row[f"{k}_w"] if weighted else row[k]) or 0), float(row[f"{n}_nn"] or 0),
                              float(row[f"{k}_kk"] or 0), float(row[f"{k}_kn"] or 0), min_devices, independent)
