"""Property: whatever mixture of valid, invalid and repeated rows arrives, nothing is lost or
counted twice, and ingesting the same files again changes nothing."""

from __future__ import annotations

from conftest import NOW, counts, valid_table, with_values, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ingest import SCHEMA, breaking

from pipeline.ingest.run import ingest

rows_plan = st.lists(st.tuples(st.sampled_from(["valid", "invalid", "repeat"]),
                               st.integers(0, len(SCHEMA.rules) - 1)), min_size=1, max_size=40)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan_a=rows_plan, plan_b=rows_plan)
def test_conservation_and_idempotence(tmp_path_factory, plan_a, plan_b):
    tmp = tmp_path_factory.mktemp("prop")
    db_path = tmp / "t.duckdb"
    base = valid_table(len(plan_a) + len(plan_b), seed=77)
    tables = []
    offset = 0
    for plan in (plan_a, plan_b):
        t = base.slice(offset, len(plan))
        for i, (kind, rule) in enumerate(plan):
            if kind == "invalid":
                t = with_values(t, i, **breaking(SCHEMA.rules[rule]))
            elif kind == "repeat" and offset + i > 0:  # the id of an earlier row, here or in the other file
                t = with_values(t, i, event_id=base["event_id"][(offset + i) // 2].as_py())
        tables.append(t)
        offset += len(plan)
    files = [write(t, tmp / "land" / f"{n}.parquet") for n, t in enumerate(tables)]

    result = ingest(db_path, files, now=NOW)

    for f in result.files:
        assert f.accepted + f.quarantined + f.duplicates == f.rows_read
    c = counts(db_path)
    assert c["events"] == c["distinct_ids"] == c["accepted"]
    assert c["accepted"] + c["quarantined"] + c["duplicates"] == c["rows_read"] == sum(t.num_rows for t in tables)
    assert c["quarantine"] == sum(kind == "invalid" for kind, _ in plan_a + plan_b)
    ingest(db_path, files, now=NOW)
    assert counts(db_path) == c
