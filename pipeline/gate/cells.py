"""Routing finer than a segment: `routing.dimensions` (e.g. [soc]) in gates/admission.yaml makes the gate judge
every cell of a segment (one value of those dimensions) on its own, so the routing table can keep the edge on
the chips where it works and move only the failing ones (docs/drill-down.md "Routing by device").

A cell leaves its segment's decision on a gate only on evidence. Each enforced gate the drill-down splits
(pipeline/gate/drill.py READS) that the segment judged is tested on the cell's device-adjusted counts, by the
segment's own test:

- where the segment fails the gate, for evidence that the cell is within the threshold (a cell keeps the edge
  only when it shows it: memory that kills apps is not given the benefit of the doubt);
- where the segment passes it, for evidence that the cell breaks the threshold.

Each gate's cells are one Holm family at the alpha the segment's test got: the extra checks spend the segment's
error budget, not a new one. A cell fails when one gate fails in it; passes when it shows itself within every
gate its segment fails, and breaks none; otherwise, and with fewer than min_devices devices, it follows its
segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.common.config import Config
from pipeline.common.vocabulary import CellStatus, Side, Status, Verdict
from pipeline.gate import drill, figures, stats

PASS, FAIL, INHERIT = CellStatus.PASS, CellStatus.FAIL, CellStatus.INHERIT


@dataclass
class CellVerdict:
    values: dict[str, str]
    devices: int
    status: CellStatus
    failed_gates: list[str] = field(default_factory=list)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**self.values, "devices": self.devices, "status": self.status, "failed_gates": self.failed_gates,
                "reason": self.reason}


def judge(con: Any, result: Any, config: Config) -> dict[str, list[CellVerdict]]:
    """Per judged segment key, its cells' verdicts (read inside the gate's source.reading)."""
    by = config.routing.dimensions
    params = result.window.params(result.release)
    rows = {"counts": drill.by_segment(figures.counts(con, params, config, by)),
            "days": drill.by_segment(figures.day_counts(con, params, config, by))}
    out = {}
    for segment in result.segments:
        if segment.decision != Verdict.INSUFFICIENT_DATA:
            out[segment.key] = _segment(segment, rows, by, config)
    return out


def _segment(segment: Any, rows: dict[str, Any], by: tuple[str, ...], config: Config) -> list[CellVerdict]:
    edge = {r["cell"]: r for r in rows["counts"].get((Side.EDGE, segment.key), [])}
    cells = {cell: CellVerdict(drill.cell_values(cell, by), int(r["devices"]), INHERIT) for cell, r in edge.items()}
    judged = {cell for cell, v in cells.items() if v.devices >= config.min_devices}
    outcomes: dict[str, dict[str, str]] = {cell: {} for cell in judged}  # cell -> gate -> pass | fail | inherit
    for gate in drill.READS:
        table, k, n, harm_above = drill.reading(gate, config)
        check = segment.checks.get(gate)
        test = check.tests.get(check.main_test) if check else None
        if (check is None or check.mode != "enforce" or check.status not in (Status.PASS, Status.FAIL)
                or test is None or test.alpha is None):
            continue
        source = {r["cell"]: r for r in rows[table].get((Side.EDGE, segment.key), [])}
        cloud = {drill.cloud_key(drill.cell_values(r["cell"], by)): r
                 for r in rows[table].get((Side.CLOUD, segment.key), [])}
        failing = check.status == Status.FAIL
        p_values = {}
        for cell in judged:
            row = source.get(cell)
            if row is not None:  # the test of departing from the segment's decision on this gate
                p_values[cell] = drill.p_value(gate, row, cloud.get(drill.cloud_key(cells[cell].values)), k, n,
                                               harm_above, drill.threshold(gate, config, segment.task), config,
                                               harm=not failing)
        rejected = stats.holm(p_values, test.alpha)
        for cell in p_values:
            departs = cell in rejected
            outcomes[cell][gate] = (PASS if departs else FAIL) if failing else (FAIL if departs else PASS)
    segment_failed = [g for g in segment.failed_gates if g in drill.READS]
    for cell in judged:
        gates = outcomes[cell]
        v = cells[cell]
        v.failed_gates = [g for g, o in gates.items() if o == FAIL]
        own = [g for g in v.failed_gates if g not in segment_failed]  # failed where its segment passes
        unshown = [g for g in segment_failed if gates.get(g) != PASS]
        reasons = ([f"fails {', '.join(own)} on its own (its segment passes)"] if own else []) + (
            [f"not shown within {', '.join(unshown)} (its segment fails)"] if unshown and gates else [])
        if own:
            v.status, v.reason = FAIL, "; ".join(reasons)
        elif gates and not unshown:
            v.status, v.reason = PASS, (f"shown within {', '.join(segment_failed)} (its segment fails)"
                                        if segment_failed else "breaks no gate on its own")
        elif gates:
            v.failed_gates, v.reason = unshown, "; ".join(reasons)
        else:
            v.reason = "no gate could be judged on it"
    for cell, v in cells.items():
        if cell not in judged:
            v.reason = f"{v.devices} devices (< min_devices {config.min_devices}): judged with its segment"
    return sorted(cells.values(), key=lambda v: tuple(v.values.values()))
