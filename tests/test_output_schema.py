"""Every --json output carries schema_version and validates against its JSON Schema
in schemas/output/, on real outputs of the demo data."""

from __future__ import annotations

import json
import subprocess

import jsonschema
import pytest
import referencing
from conftest import DEMO_AS_OF, ROOT, run_cli

from pipeline.common.output_schema import OUTPUTS, SCHEMA_VERSION, schema


def _validator(name: str) -> jsonschema.Draft202012Validator:
    registry = referencing.Registry().with_resources(
        [(schema(n)["$id"], referencing.Resource.from_contents(schema(n))) for n in OUTPUTS])
    jsonschema.Draft202012Validator.check_schema(schema(name))
    return jsonschema.Draft202012Validator(schema(name), registry=registry)


def _pipeline(cwd, *args: str) -> subprocess.CompletedProcess:
    """The command in this process (its JSON is under test, not its process): conftest.run_cli."""
    return run_cli(*args, cwd=cwd)


def test_gate_json_and_routing_table_validate(demo_dir):
    done = _pipeline(demo_dir, "gate", "--release", "4.12", "--as-of", DEMO_AS_OF, "--json", "--no-alerts",
                     "--routing-out", "routing-4.12.json")
    assert done.returncode == 1, done.stderr
    gate = json.loads(done.stdout)
    assert gate["schema_version"] == SCHEMA_VERSION
    _validator("gate").validate(gate)
    routing = json.loads((demo_dir / "routing-4.12.json").read_text())
    assert routing["schema_version"] == SCHEMA_VERSION
    _validator("routing").validate(routing)
    assert routing["rollout"] == "rollback_to_cloud" and {r["route"] for r in routing["routes"]} == {"cloud"}
    state = _pipeline(demo_dir, "state", "--release", "4.12", "--json")
    assert state.returncode == 0, state.stderr
    view = json.loads(state.stdout)
    _validator("state").validate(view)
    assert view["status"] == "rollback_to_cloud" and view["segments"][-1]["segment"] == "release"


def test_nightly_and_ingest_json_validate(tmp_path):
    db = str(tmp_path / "t.duckdb")
    ingest = _pipeline(ROOT, "ingest", "--db", db, "--as-of", DEMO_AS_OF, "--json", "sample_logs")
    assert ingest.returncode == 0, ingest.stderr
    ingested = json.loads(ingest.stdout)
    _validator("ingest").validate(ingested)
    assert (ingested["accepted"], ingested["quarantined"], ingested["duplicates"]) == (35983, 17, 0)
    nightly = _pipeline(ROOT, "nightly", "--landing", "sample_logs", "--db", db, "--as-of", DEMO_AS_OF, "--json")
    assert nightly.returncode == 0, nightly.stderr
    run = json.loads(nightly.stdout)
    _validator("nightly").validate(run)
    assert run["verdicts"] == {"4.11": "keep_edge", "4.12": "rollback_to_cloud"}
    assert [g["schema_version"] for g in run["gates"]] == [SCHEMA_VERSION, SCHEMA_VERSION]


def test_the_schemas_reject_what_a_consumer_could_not_read():
    validator = _validator("gate")
    bad = {"schema_version": SCHEMA_VERSION, "release": "4.12", "verdict": "roll_back", "evaluated_at": "now",
           "as_of": "2026-12-01T00:00:00Z", "window": {}, "config": {"path": "x", "digest": "y"}, "segments": []}
    messages = sorted(e.message for e in validator.iter_errors(bad))
    assert any("'roll_back' is not one of" in m for m in messages)
    assert any("'now' does not match" in m for m in messages)
    assert any("'start' is a required property" in m for m in messages)


@pytest.mark.parametrize("name", OUTPUTS)
def test_pipeline_schema_prints_each_shipped_schema(name):
    done = _pipeline(ROOT, "schema", name)
    assert done.returncode == 0
    assert json.loads(done.stdout) == schema(name)


def test_ledger_json_validates_with_and_without_costs(demo_dir):
    for extra in ((), ("--config", str(ROOT / "gates" / "costs.example.yaml"))):
        done = _pipeline(demo_dir, "ledger", "--release", "4.12", "--as-of", DEMO_AS_OF, "--json", *extra)
        assert done.returncode == 0, done.stderr
        ledger = json.loads(done.stdout)
        assert ledger["schema_version"] == SCHEMA_VERSION
        _validator("ledger").validate(ledger)
        assert (ledger["missing_costs"] == []) == bool(extra)


def test_drill_and_compare_json_validate(demo_dir):
    drill = _pipeline(demo_dir, "drill", "--release", "4.12", "--as-of", DEMO_AS_OF, "--json")
    assert drill.returncode == 0, drill.stderr
    found = json.loads(drill.stdout)
    _validator("drill").validate(found)
    assert found["schema_version"] == SCHEMA_VERSION and len(found["drills"]) > 10
    compare = _pipeline(demo_dir, "compare", "--release", "4.12", "--against", "4.11", "--as-of", DEMO_AS_OF,
                        "--json", "--by", "soc")
    assert compare.returncode == 0, compare.stderr
    compared = json.loads(compare.stdout)
    _validator("compare").validate(compared)
    assert compared["by"] == ["soc"] and all(c["cell"] and "soc" in c["cell"] for c in compared["comparisons"])
