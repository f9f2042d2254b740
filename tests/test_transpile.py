"""The Spark SQL of every sql/ file the gate and the rollup run on Spark equals its golden file (no JVM).

A change to one of those files, or a SQLGlot upgrade, shows up here as a diff of the SQL Spark would run;
rewrite the goldens with `.venv/bin/python tests/golden/regenerate.py --update-goldens`, read the diff and commit
it. Nothing here writes a golden file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlglot  # in the test extra

from pipeline.warehouse.spark.dialect import SPARK_FILES, spark_sql, transpile

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = ".venv/bin/python tests/golden/regenerate.py --update-goldens"
sys.path.insert(0, str(GOLDEN))
from regenerate import golden_path  # noqa: E402


def test_sqlglot_is_the_pinned_version():
    pinned = [line for line in (GOLDEN.parent.parent / "pyproject.toml").read_text().splitlines()
              if '"sqlglot==' in line]
    assert pinned and all(f'"sqlglot=={sqlglot.__version__}"' in line for line in pinned)


@pytest.mark.parametrize("relname", SPARK_FILES)
def test_spark_sql_equals_its_golden_file(relname):
    path = golden_path(relname)
    assert path.is_file(), f"no golden file {path}; run: {UPDATE}"
    assert spark_sql(relname) == path.read_text(), (
        f"the Spark SQL of {relname} changed; if intended: {UPDATE}")


def test_no_golden_file_without_its_sql_file():
    expected = {golden_path(r) for r in SPARK_FILES}
    assert set((GOLDEN / "spark").rglob("*.sql")) == expected


def test_the_two_rewrites_sqlglot_lacks():
    grouping, quantile = transpile("SELECT grouping(a, b, c), quantile_cont(x, [0.5, 0.95]), grouping(a) FROM t "
                                   "GROUP BY ROLLUP (a, b, c)")[0].split(",")[:2]
    assert " ".join(grouping.split()) == "SELECT (GROUPING(a) * 4 + GROUPING(b) * 2 + GROUPING(c))"
    assert " ".join(quantile.split()) == "PERCENTILE(x"
    assert "ARRAY(0.5, 0.95)" in transpile("SELECT quantile_cont(x, [0.5, 0.95]) FROM t")[0]
    assert ":release" in transpile("SELECT 1 FROM t WHERE release = $release")[0]


def test_the_goldens_script_compares_and_writes_only_when_told(tmp_path):
    done = subprocess.run([sys.executable, str(GOLDEN / "regenerate.py")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    # a golden that differs: the check names it, exits 1 and leaves the file as it was
    path = golden_path(SPARK_FILES[0])
    original = path.read_text()
    try:
        path.write_text(original + "-- edited\n")
        done = subprocess.run([sys.executable, str(GOLDEN / "regenerate.py")], capture_output=True, text=True)
        assert (done.returncode, done.stdout) == (1, f"differs {path.relative_to(GOLDEN)}\n")
        assert path.read_text() == original + "-- edited\n"
    finally:
        path.write_text(original)


def test_duckdb_list_functions_and_quantile_disc_get_duckdb_semantics():
    text = transpile("SELECT list_position(l, x), list_extract(l, i), quantile_disc(x, $f), quantile_disc(x, 0.5) "
                     "FROM t")[0]
    assert "NULLIF(ARRAY_POSITION(l, x), 0)" in text  # DuckDB: NULL when absent; Spark: 0
    assert "TRY_ELEMENT_AT(l, CAST(NULLIF(i, 0) AS INT))" in text  # DuckDB: NULL out of range (and at 0); Spark raises
    assert "TRANSFORM(ARRAY(ARRAY_SORT(COLLECT_LIST(x))), s -> CASE WHEN SIZE(s) = 0 THEN NULL ELSE " \
        "TRANSFORM(:f, q -> ELEMENT_AT(s, " in text  # sorted once, not once per fraction
    assert "PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY x)" in text
