"""The share of devices that come back, edge against the cloud hold-back (retention)."""

from __future__ import annotations

import math
from typing import Any

from pipeline.common.registry import GateName
from pipeline.common.vocabulary import Side
from pipeline.gate import stats
from pipeline.gate.measure import (
    RETENTION_SQL,
    Measure,
)
from pipeline.gate.result import DETECT_POWER, GateCheck, Sizing

RETENTION_TAU = 0.03  # the mixing scale of the retention test: a drop of 3 points past the tolerance at least
RETENTION_SIZED_DROP = 0.05  # devices_to_detect of retention: for a drop of 5 points in the share returning


class Retention(Measure):
    """The measurements of the retention gates: a part of evaluate._Measure."""

    def retention(self, row: dict, gates: Any) -> GateCheck:
        key = (row["task"], row["device_tier"])
        if key not in self.retention_pools:
            self.retention_pools[key] = self._retention(gates, key)
        return self.retention_pools[key]

    def release_retention(self) -> GateCheck:
        check = self._retention(self.config.gates, ())
        check.release_wide = True
        return check

    def _retention(self, gates: Any, key: tuple) -> GateCheck:
        """The share of cohort devices that come back, the edge arm's below the cloud hold-back's by at most
        max_drop: one Bernoulli per device, so the two arms' binomial variances are the device-level ones;
        a mixture SPRT (or one-look z test) of (cloud - edge) - max_drop. A task x tier's devices are those
        whose first request was of the task (sql/gate/retention.sql)."""
        check = self._new(GateName.RETENTION, gates)
        check.sql = f"sql/{RETENTION_SQL}.sql"
        settings = gates.retention
        check.extra["horizon_days"] = settings.horizon_days
        if self.returning is None:
            check.inapplicable = True
            check.note = "the hold-back is assigned per request (assignment.unit): no device is on one arm only"
            return check
        edge, cloud = self.returning.get((Side.EDGE, key)), self.returning.get((Side.CLOUD, key))
        ne, nc = (edge or {}).get("devices", 0), (cloud or {}).get("devices", 0)
        check.rows = check.devices = ne
        if min(ne, nc) < self.config.min_devices:
            check.short_of_data = True
            check.note = (f"{ne:,} edge and {nc:,} cloud devices first seen at least {settings.horizon_days:g} days "
                          f"before the window's end; {self.config.min_devices} needed on each arm")
            return check
        pe, pc = edge["returned"] / ne, cloud["returned"] / nc
        drop, margin = pc - pe, settings.max_drop
        check.measured, check.baseline = drop, pc
        check.baseline_level = "release" if not key else "task x tier (devices by their first task)"
        check.extra.update(edge_return=pe, cloud_return=pc, cloud_devices=nc)
        var = pe * (1 - pe) / ne + pc * (1 - pc) / nc
        if var <= 0:  # every device returned (or none) on both arms: the pooled rate's variance
            pooled = (edge["returned"] + cloud["returned"]) / (ne + nc)
            var = max(pooled * (1 - pooled), 0.25 / (ne + nc)) * (1 / ne + 1 / nc)
        half = stats.z_two_sided(self.conf) * math.sqrt(var)
        check.reading_interval = (drop - half, drop + half)
        tau = max(2 * margin, RETENTION_TAU)
        self._z_test(check, "", drop - margin, var, tau,
                     ("mixture SPRT" if self.sequential else "one-look z test")
                     + " of cloud - edge share of devices returning against the tolerance, one Bernoulli per device",
                     shown=lambda x: x + margin)
        gap = RETENTION_SIZED_DROP - margin
        if check.burden == "prove_harm" and gap > 0:
            p1 = max(pc - RETENTION_SIZED_DROP, 0.0)
            unit_variance = p1 * (1 - p1) + pc * (1 - pc) * ne / nc  # per edge device, the cloud's spread over them
            check.sizing = Sizing("", lambda a: stats.units_needed_difference(
                gap, unit_variance, a, DETECT_POWER, tau, self.sequential), ne, ne, past=drop > margin,
                catches=f"a drop of {RETENTION_SIZED_DROP * 100:.0f} points")
        return check
