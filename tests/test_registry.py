"""The gate registry is the one list: config, evaluation and rendering agree with it."""

import dataclasses

from pipeline.common.config import Gates
from pipeline.common.registry import GATE_NAMES, GATES
from pipeline.gate.evaluate import GATE_ORDER


def test_config_declares_exactly_the_registered_gates_in_order():
    assert [f.name for f in dataclasses.fields(Gates)] == list(GATE_NAMES)


def test_gate_order_and_columns_come_from_the_registry():
    assert GATE_ORDER == list(GATE_NAMES)
    assert len({g.column for g in GATES}) == len(GATES)
    assert {g.direction for g in GATES} <= {"max", "min"}
