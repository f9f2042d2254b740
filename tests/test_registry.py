"""The gate registry is the one list: config, evaluation and rendering agree with it."""

import dataclasses

import pytest
import yaml
from conftest import ROOT

from pipeline.common.config import Gates
from pipeline.common.registry import GATE_NAMES, GATES


def test_config_declares_exactly_the_registered_gates_in_order():
    assert [f.name for f in dataclasses.fields(Gates)] == list(GATE_NAMES)


@pytest.mark.parametrize("name", ["admission.yaml", "costs.example.yaml"])
def test_the_shipped_configs_list_the_registered_gates_in_order(name):
    assert list(yaml.safe_load((ROOT / "gates" / name).read_text())["gates"]) == list(GATE_NAMES)


def test_gate_columns_and_directions_are_distinct_and_known():
    assert len({g.column for g in GATES}) == len(GATES)
    assert {g.direction for g in GATES} <= {"max", "min"}
