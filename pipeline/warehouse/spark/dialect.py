"""sql/ is written once, in DuckDB's dialect; Spark runs it through SQLGlot (pinned in pyproject.toml) with
this small dialect subclass. SQLGlot's own Spark writer already turns `$name` into `:name`, lists into
`array(...)`, `list_contains` into `array_contains`, intervals and `GROUP BY ALL`; the subclass adds the two
rewrites it lacks, and the DuckDB list functions it passes through by name:

- DuckDB's multi-column `grouping(a, b, c)` -> `grouping(a) * 4 + grouping(b) * 2 + grouping(c)` (the same
  bit mask, in a form Spark accepts);
- `quantile_cont(x, f)` -> `percentile(x, f)` (Spark's exact, interpolated percentile; `f` may be an array);
- `quantile_disc(x, list)` -> the same order statistics from Spark's sorted values (it has no list form);
- `list_position` / `list_extract` -> `array_position` / `try_element_at` with DuckDB's NULLs;
- `WITH x AS [NOT] MATERIALIZED (...)` loses the hint (Spark plans CTE reuse itself).

`spark_sql(relname)` is what the Spark engine runs; tests/golden/spark/ holds the expected output of every
file the gate and the rollup run on Spark (tests/golden/regenerate.py --update-goldens rewrites them,
tests/test_transpile.py compares, no JVM needed). A file with a construct Spark has none of (`getvariable()`,
`DELETE ... USING`, sequences) is not in SPARK_FILES: the Spark engine does that part its own way (docs/spark.md).
"""

from __future__ import annotations

from functools import cache

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.generators.spark import SparkGenerator

from pipeline.warehouse import sqlfiles

# Every sql/ file (or `file#view` for one view of a DDL file) the Spark engine runs.
SPARK_FILES: tuple[str, ...] = (
    "ddl/derived#events_enriched",
    "views/settings_bound",
    "gate/releases",
    "gate/rolled_releases",
    "gate/has_release",
    "gate/active_releases",
    "gate/segment_counts",
    "gate/device_days",
    "gate/error_days",
    "gate/kept_device_days",
    "gate/assignment_requests",
    "gate/assignment_devices",
    "gate/retention",
    "gate/first_seen",
    "gate/weak_latency",
    "gate/segment_histograms",
    "backtest/source",
    "rollups/chunk_rows",
    "rollups/insert_days",
    "rollups/insert_hist_days",
    "rollups/insert_device_days",
)


def _grouping(gen: SparkGenerator, node: exp.Grouping) -> str:
    args = node.expressions
    if len(args) <= 1:
        return gen.function_fallback_sql(node)
    n = len(args)
    terms = [f"GROUPING({gen.sql(a)})" + (f" * {2 ** (n - 1 - i)}" if i < n - 1 else "") for i, a in enumerate(args)]
    return "(" + " + ".join(terms) + ")"


def _percentile(gen: SparkGenerator, node: exp.PercentileCont) -> str:
    return f"PERCENTILE({gen.sql(node, 'this')}, {gen.sql(node, 'expression')})"


def _percentile_disc(gen: SparkGenerator, node: exp.PercentileDisc) -> str:
    """DuckDB's quantile_disc(x, f): the k-th smallest non-null value, k = max(1, ceil(n f)) in exact (decimal)
    arithmetic. Spark has no list form, so a list (or a $parameter, which must be one) reads each fraction off
    the sorted values; a number uses Spark's percentile_disc."""
    x, f = gen.sql(node, "this"), gen.sql(node, "expression")
    if isinstance(node.expression, exp.Literal):
        return f"PERCENTILE_DISC({f}) WITHIN GROUP (ORDER BY {x})"
    # the values are sorted once (bound to `s` by a transform over a one-element array), not once per fraction
    pick = "ELEMENT_AT(s, GREATEST(1, CAST(CEIL(SIZE(s) * CAST(q AS DECIMAL(20, 10))) AS INT)))"
    return (f"ELEMENT_AT(TRANSFORM(ARRAY(ARRAY_SORT(COLLECT_LIST({x}))), "
            f"s -> CASE WHEN SIZE(s) = 0 THEN NULL ELSE TRANSFORM({f}, q -> {pick}) END), 1)")


def _anonymous(gen: SparkGenerator, node: exp.Anonymous) -> str:
    """DuckDB list functions SQLGlot passes through by name: list_position (NULL when absent, where Spark's
    array_position gives 0) and list_extract (NULL out of range, where Spark's ANSI element_at raises)."""
    name = node.name.lower()
    args = [gen.sql(a) for a in node.expressions]
    if name == "list_position" and len(args) == 2:
        return f"NULLIF(ARRAY_POSITION({args[0]}, {args[1]}), 0)"
    if name in ("list_extract", "list_element") and len(args) == 2:
        return f"TRY_ELEMENT_AT({args[0]}, CAST(NULLIF({args[1]}, 0) AS INT))"
    return gen.anonymous_sql(node)


def _arrays_overlap(gen: SparkGenerator, node: exp.ArrayOverlaps) -> str:
    """DuckDB's list_has_any(a, b) (SQLGlot's `a && b`, which Spark does not parse)."""
    return f"ARRAYS_OVERLAP({gen.sql(node, 'this')}, {gen.sql(node, 'expression')})"


class PipelineSpark(Spark):
    """Spark SQL as this project writes it (pinned: a SQLGlot upgrade shows up as a golden diff)."""

    class Generator(SparkGenerator):
        TRANSFORMS = {
            **SparkGenerator.TRANSFORMS,
            exp.Grouping: _grouping,
            exp.PercentileCont: _percentile,
            exp.PercentileDisc: _percentile_disc,
            exp.Anonymous: _anonymous,
            exp.ArrayOverlaps: _arrays_overlap,
        }


def _portable(node: exp.Expression) -> exp.Expression:
    """What Spark has no syntax for and can do without: DuckDB's `WITH x AS [NOT] MATERIALIZED (...)` hints
    (Spark decides itself whether to reuse a CTE)."""
    for cte in node.find_all(exp.CTE):
        cte.set("materialized", None)
    return node


def transpile(text: str) -> list[str]:
    """Each statement of DuckDB SQL `text` as Spark SQL, without comments."""
    return [_portable(s).sql(dialect=PipelineSpark, pretty=True, comments=False)
            for s in sqlglot.parse(text, read="duckdb") if s is not None]


def _statement(relname: str) -> exp.Expression:
    """The one statement a SPARK_FILES entry names: the file's only statement, or `file#view`'s view."""
    path, _, view = relname.partition("#")
    statements = [s for s in sqlglot.parse(sqlfiles.sql_file(path).text, read="duckdb") if s is not None]
    if view:
        for s in statements:
            if isinstance(s, exp.Create) and s.kind == "VIEW" and s.this.name == view:
                return s.expression
        raise KeyError(f"sql/{path}.sql has no view {view!r}")
    if len(statements) != 1:
        raise ValueError(f"sql/{path}.sql holds {len(statements)} statements; Spark runs files of one")
    return statements[0]


def query_of(statement: exp.Expression) -> exp.Expression:
    """An INSERT's query (Spark writes the rows itself, into partitions); any other statement as it is."""
    if isinstance(statement, exp.Insert):
        query = statement.expression.copy()
        with_ = statement.args.get("with_")  # DuckDB's INSERT INTO t WITH ... puts the CTEs on the query already
        if with_ is not None and query.args.get("with_") is None:
            query.set("with_", with_.copy())
        return query
    return statement


@cache
def table_columns(table: str) -> tuple[tuple[str, str], ...]:
    """(name, Spark type) of a warehouse table, from its DuckDB DDL: events and quarantine from the contract
    (db.events_ddl), the rollup tables from sql/ddl/derived.sql."""
    from pipeline.warehouse.db import events_ddl
    from pipeline.warehouse.schema import load_schema

    ddl = events_ddl(load_schema()) if table in ("events", "quarantine") else sqlfiles.sql_file("ddl/derived").text
    for s in sqlglot.parse(ddl, read="duckdb"):
        if isinstance(s, exp.Create) and s.kind == "TABLE" and s.this.this.name == table:
            return tuple((c.name, c.args["kind"].sql(dialect=PipelineSpark))
                         for c in s.this.expressions if isinstance(c, exp.ColumnDef))
    raise KeyError(f"no table {table!r} in the warehouse DDL")


@cache
def spark_sql(relname: str) -> str:
    """The Spark SQL the engine runs for `relname` (a SPARK_FILES entry): an INSERT becomes its query."""
    node = _portable(query_of(_statement(relname)))
    return node.sql(dialect=PipelineSpark, pretty=True, comments=False) + "\n"
