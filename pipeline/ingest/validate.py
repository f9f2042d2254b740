"""Row validation with Great Expectations, the validator of record, inside DuckDB or on a Spark DataFrame.

The only module that imports Great Expectations. `Validator` runs the suite through GX's SQL data source on
DuckDB; `SparkValidator` runs the same suite (the same builder, `_expectation`) through GX's Spark data source
on the Spark engine's rows; both read GX's results the same way (`_findings`) and pass the same self-test.

It turns the row rules of schemas/telemetry_event.yaml into one expectation
suite and runs it through GX's SQL data source on the ingest's staging
connection (its staging thread only), against the table `stage.batch` (the cast
rows of a batch of files, `_id` = row in the batch). It returns, per rule, GX's
own counts and the `_id`s GX found breaking the rule.

Why the connection is wrapped (GX 1.24, duckdb-engine 0.17): GX runs each
query inside `with engine.connect()` and fetches after the block; duckdb_engine's
cursor is the DuckDB connection itself, so closing it wipes the pending result
(`list index out of range`, GX issues #10738 and #11579). Our SQLAlchemy
`creator` returns a wrapper whose `cursor()` is a fresh DuckDB cursor, with its
own result set per query; GX only reads, so begin/commit/rollback do nothing.
`self_test` proves on a tiny table with known failures that this still holds,
so a library upgrade that breaks it fails loudly instead of passing rows.

Cost: BASIC runs the whole suite for its counts (no sample of failing values:
`partial_unexpected_count` 0 makes those queries return nothing at once; SUMMARY
would scan each column again for them); COMPLETE (which lists failing `_id`s) runs
only for the rules that found failures, with `partial_unexpected_count` set to
the rule's own count (on SQL the id list is capped at it even in COMPLETE).
Never `unexpected_index_query` (it drops row conditions) nor stream_results
(it silently returns one row).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import duckdb
import numpy as np

from pipeline.common.errors import PipelineError, first_line
from pipeline.ingest.rule_results import INDEX, STAGE, RuleResult, Validation, ValidatorError
from pipeline.warehouse.schema import Rule, Schema

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
# GX imports pyspark when it is installed (the spark extra), and PySpark 4.x warns on import that pandas >= 3 is
# not fully supported; the DuckDB path never touches Spark, and the Spark path hands it Arrow data, not pandas.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas >= 3", category=FutureWarning)

import duckdb_engine  # noqa: E402
import great_expectations as gx  # noqa: E402  (the env var must be set first)
import great_expectations.expectations as gxe  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.expectations.row_conditions import Column as GxColumn  # noqa: E402

# GX logs each failed metric with its traceback; the failure reaches the user as the file's
# one-line rejection reason instead, so GX's own logging stays off stderr.
_gx_log = logging.getLogger("great_expectations")
_gx_log.addHandler(logging.NullHandler())
_gx_log.propagate = False
_gx_log.setLevel(logging.CRITICAL + 1)

TABLES = ("batch", "file", "selftest")  # staging tables GX reads: a batch of files, one file, the self-test


class SelfTestFailed(PipelineError):
    """Great Expectations on DuckDB no longer gives the counts and ids it must."""


class FreshCursorConnection(duckdb_engine.ConnectionWrapper):
    """What SQLAlchemy gets from our creator: a fresh cursor of the connection the Validator is
    bound to now, per query (see the module docstring). SQLAlchemy pools this object, so it looks
    the connection up on every cursor() rather than keeping the one it was made with."""

    def __init__(self, current: Callable[[], duckdb.DuckDBPyConnection]):
        super().__init__(current())
        self._current = current

    def cursor(self) -> duckdb_engine.CursorWrapper:
        return duckdb_engine.CursorWrapper(self._current().cursor(), self)

    def begin(self) -> None:
        pass

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        pass  # the ingest owns the connection


def _expectation(rule: Rule, now: datetime) -> gxe.Expectation:
    meta = {"rule": rule.name}
    if rule.kind == "not_null":
        return gxe.ExpectColumnValuesToNotBeNull(column=rule.column, meta=meta)
    if rule.kind == "in_set":
        return gxe.ExpectColumnValuesToBeInSet(column=rule.column, value_set=list(rule.arg("values")), meta=meta)
    if rule.kind == "in_range":
        return gxe.ExpectColumnValuesToBeBetween(
            column=rule.column, min_value=rule.arg("min"), max_value=rule.arg("max"), meta=meta
        )
    if rule.kind == "a_le_b":
        return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A=rule.arg("b"), column_B=rule.arg("a"), or_equal=True,
            ignore_row_if="either_value_is_missing", meta=meta,
        )
    if rule.kind == "not_after_ingest":
        bound = now + timedelta(hours=rule.arg("max_ahead_hours"))
        return gxe.ExpectColumnValuesToBeBetween(column=rule.column, max_value=bound, meta=meta)
    if rule.kind == "forbidden_when":
        return gxe.ExpectColumnValuesToNotBeInSet(
            column=rule.column, value_set=[rule.arg("forbidden_value")],
            row_condition=GxColumn(rule.arg("when_column")) == rule.arg("when_value"), meta=meta,
        )
    raise ValueError(f"unknown rule kind {rule.kind!r} for rule {rule.name}")


def _exception_message(res: Any) -> str | None:
    """GX's own message when the expectation's metric raised; None when it was evaluated.
    On SQL, exception_info maps each failed metric to its ExceptionInfo; elsewhere it is flat."""
    info = res.exception_info or {}
    # GX resolves metrics in no fixed order; the count's own error is the one that blocked the rule
    found = sorted(((k, v) for k, v in info.items() if hasattr(v, "exception_message") and v.raised_exception),
                   key=lambda kv: "unexpected_count'" not in str(kv[0]))  # keys: MetricConfigurationID reprs
    found_values: list[Any] = [v for _, v in found]
    if info.get("raised_exception") is True:
        found_values.insert(0, info)
    if not found_values:
        return None
    messages = [str(getattr(f, "exception_message", None) or f.get("exception_message")) for f in found_values]
    own = [m for m in messages if "is not available" not in m] or messages  # a cause beats its echoes
    return own[0].strip().splitlines()[0].removesuffix("; see parent stack trace for more detail.")


# The self-test: ids with known failures. v is null at 1, above 10 at 3 and 4; s not in {a} at 2;
# lo > hi at 4 (a_le_b); flag true where kind = 'c' at 3 only (row 5 has flag true under kind 'e').
_SELFTEST_ROWS = """
SELECT * FROM (VALUES
    (0, 5, 'a', 1.0, 2.0, 'c', false), (1, NULL, 'a', 1.0, 2.0, 'e', false), (2, 7, 'x', NULL, 2.0, 'c', false),
    (3, 11, 'a', 1.0, 1.0, 'c', true), (4, 12, 'a', 3.0, 2.0, 'e', false), (5, 2, 'a', 1.0, 2.0, 'e', true)
) t(_id, v, s, lo, hi, kind, flag)
"""
_SELFTEST_RULES = (
    (Rule("v_not_null", "not_null", "v"), [1]),
    (Rule("v_in_range", "in_range", "v", (("max", 10), ("min", 0))), [3, 4]),
    (Rule("s_in_set", "in_set", "s", (("values", ("a",)),)), [2]),
    (Rule("lo_le_hi", "a_le_b", None, (("a", "lo"), ("b", "hi"))), [4]),
    (Rule("no_flag_when_c", "forbidden_when", "flag",
          (("forbidden_value", True), ("when_column", "kind"), ("when_value", "c"))), [3]),
)


class _SwallowedByGX(logging.Handler):
    """GX's metric graph catches an exception that is not one of its own metric errors, logs one line and
    aborts, so every expectation then reports only "Metric ... is not available". This handler, on the logger
    that line goes to, keeps the exception itself: emit() runs inside GX's `except` block, where
    sys.exc_info() is that exception, traceback included."""

    LOGGER = "great_expectations.validator.validation_graph"

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.caught: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        if exc is not None:
            self.caught.append(exc)

    def __enter__(self) -> _SwallowedByGX:
        log = logging.getLogger(self.LOGGER)  # GX's loggers are silenced above: this one hears errors, alone
        self._saved = log.level, log.propagate
        log.setLevel(logging.ERROR)
        log.propagate = False
        log.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        log = logging.getLogger(self.LOGGER)
        log.removeHandler(self)
        log.level, log.propagate = self._saved

    def unevaluated(self, name: str, message: str) -> ValidatorError:
        """The error for rule `name` that GX could not evaluate: GX's own message, or the exception it swallowed
        (named, and chained for --debug)."""
        if not self.caught:
            return ValidatorError(f"rule {name}: Great Expectations could not evaluate it: {message}")
        real = self.caught[0]
        error = ValidatorError(f"rule {name}: Great Expectations could not evaluate it: its metric resolution "
                               f"raised {type(real).__name__}: {first_line(real)}")
        error.__cause__ = real
        return error


def _findings(batch: Any, suite: Any, rules: dict[str, Rule], now: datetime, rows: int) -> Validation:
    """GX's counts per rule (BASIC), then the failing row ids of the rules that found any (COMPLETE, on
    those rules only). Raises ValidatorError naming the rule GX could not evaluate, and the exception behind
    it where GX swallowed one (chained, for --debug)."""
    with _SwallowedByGX() as swallowed:
        return _validated(batch, suite, rules, now, rows, swallowed)


def _validated(batch: Any, suite: Any, rules: dict[str, Rule], now: datetime, rows: int,
               swallowed: _SwallowedByGX) -> Validation:
    counted = batch.validate(suite, result_format={"result_format": "BASIC", "partial_unexpected_count": 0})
    by_rule = {res.expectation_config.meta["rule"]: res for res in counted.results}
    results, failed = [], []
    for name in rules:  # in suite order, so the first rule that raised is the one named
        res = by_rule[name]
        message = _exception_message(res)
        seen = int(res.result.get("element_count") or 0)
        # a row condition no row meets leaves no count: nothing to break (element_count is checked below)
        empty = seen == 0 and rules[name].kind == "forbidden_when"
        if message is not None or (res.result.get("unexpected_count") is None and not empty):
            raise swallowed.unevaluated(name, message or "no result")
        count = int(res.result.get("unexpected_count") or 0)
        if rules[name].kind in ("not_null", "in_set", "in_range") and seen != rows:
            raise ValidatorError(f"rule {name}: Great Expectations saw {seen} rows of {rows}")
        results.append(RuleResult(name, res.expectation_config.type, bool(res.success),
                                  seen, count))
        if count:
            failed.append(name)
    validation = Validation(results)
    if failed:
        expected = {r.rule: r.unexpected_count for r in results}
        complete = batch.validate(
            gx.ExpectationSuite(name="failed_rules", expectations=[_expectation(rules[r], now) for r in failed]),
            result_format={"result_format": "COMPLETE", "unexpected_index_column_names": [INDEX],
                           "partial_unexpected_count": max(expected[r] for r in failed),
                           "return_unexpected_index_query": False},
        )
        for res in complete.results:
            name = res.expectation_config.meta["rule"]
            message = _exception_message(res)
            if message is not None:
                raise swallowed.unevaluated(name, message)
            listed = res.result.get("unexpected_index_list") or []
            idx = np.fromiter((row[INDEX] for row in listed), dtype=np.int64, count=len(listed))
            if len(idx) != expected[name]:
                raise ValidatorError(f"rule {name}: Great Expectations counted {expected[name]} failing rows "
                                     f"but listed {len(idx)}")
            validation.failing_rows[name] = np.sort(idx)
    return validation


class _SuiteValidator:
    """What both validators hold: one ephemeral GX context (progress bars off), the suite per ingestion
    time, and whether the self-test has run."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.rules = {r.name: r for r in schema.rules}
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self._suites: dict[datetime, Any] = {}
        self._tested = False

    def suite(self, now: datetime) -> Any:
        """The whole suite; `now` is the ingestion time the event_time rule is bound to."""
        if now not in self._suites:
            self._suites[now] = gx.ExpectationSuite(name=f"telemetry_event_v{self.schema.version}",
                                                    expectations=[_expectation(r, now) for r in self.schema.rules])
        return self._suites[now]


class Validator(_SuiteValidator):
    """One GX context, reused for every batch a process validates, bound to one DuckDB
    connection at a time (`bind`). `connection_wrapper` is swappable for the self-test's test."""

    def __init__(self, schema: Schema,
                 connection_wrapper: Callable[[Callable[[], duckdb.DuckDBPyConnection]], Any] = FreshCursorConnection):
        super().__init__(schema)
        self._wrap = connection_wrapper
        self._con: duckdb.DuckDBPyConnection | None = None
        self._definitions: dict[str, Any] = {}

    def bind(self, con: duckdb.DuckDBPyConnection) -> None:
        """Validate on `con` from now on; it has the `stage` database attached. The first bind
        builds the data source and runs the self-test."""
        self._con = con
        if not self._definitions:
            source = self.context.data_sources.add_sql(
                "warehouse", connection_string="duckdb:///:memory:",  # the dialect; rows come from the creator
                kwargs={"creator": lambda: self._wrap(self._bound)},
            )
            for table in TABLES:
                asset = source.add_query_asset(table, query=f"SELECT * FROM {STAGE}.{table}")
                self._definitions[table] = asset.add_batch_definition_whole_table(table)
        if not self._tested:
            self.self_test()
            self._tested = True

    def _bound(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise RuntimeError("Validator used before bind()")
        return self._con

    def validate(self, table: str, now: datetime, rows: int) -> Validation:
        """GX's findings on `stage.<table>` of `rows` rows. Raises ValidatorError naming the rule GX
        could not evaluate."""
        return self._run(table, self.suite(now), self.rules, now, rows)

    def _run(self, table: str, suite: Any, rules: dict[str, Rule], now: datetime, rows: int) -> Validation:
        return _findings(self._definitions[table].get_batch(), suite, rules, now, rows)

    def self_test(self) -> None:
        """Known failures on a six-row table must come back with their exact counts and ids."""
        con = self._bound()
        con.execute(f"CREATE OR REPLACE TABLE {STAGE}.selftest AS {_SELFTEST_ROWS}")
        try:
            found, cause = _self_test_finding(lambda suite, rules, now: self._run("selftest", suite, rules, now, 6))
        finally:
            con.execute(f"DROP TABLE IF EXISTS {STAGE}.selftest")
        if found is not None:
            raise SelfTestFailed(
                f"the Great Expectations self-test on DuckDB failed ({found}); "
                f"great-expectations {gx.__version__}, duckdb-engine {duckdb_engine.__version__}, "
                f"duckdb {duckdb.__version__}: use the versions pinned in pyproject.toml"
            ) from cause


def _self_test_finding(run: Callable[[Any, dict[str, Rule], datetime], Validation]
                       ) -> tuple[str | None, BaseException | None]:
    """(None, None) when GX finds exactly the self-test's known failures; else what went wrong, in one line,
    and the exception behind it when GX raised (chained by the caller, for --debug)."""
    rules = {rule.name: rule for rule, _ in _SELFTEST_RULES}
    now = datetime(2000, 1, 1)
    suite = gx.ExpectationSuite(name="self_test", expectations=[_expectation(r, now) for r in rules.values()])
    try:
        found = run(suite, rules, now)
    except Exception as exc:  # any failure here is the same finding: the GX path is broken
        return first_line(exc), exc
    for rule, ids in _SELFTEST_RULES:
        got = found.failing_rows.get(rule.name, np.array([], np.int64)).tolist()
        if got != ids:
            return f"rule {rule.name}: expected failing rows {ids}, got {got}", None
    return None, None


class SparkValidator(_SuiteValidator):
    """The same suite on a Spark DataFrame (the Spark engine's ingest), through GX's Spark data source. The
    rows carry INDEX (`_id`, a row key: event_id can be null or repeated); the future-event rule's bound is a
    datetime, compared as a UTC wall time (the session's timestampType is TIMESTAMP_NTZ). The first validation
    runs the self-test on a six-row DataFrame of the session."""

    def __init__(self, schema: Schema):
        super().__init__(schema)
        asset = self.context.data_sources.add_spark("spark").add_dataframe_asset("rows")
        self._definition = asset.add_batch_definition_whole_dataframe("rows")

    def _batch(self, df: Any) -> Any:
        return self._definition.get_batch(batch_parameters={"dataframe": df})

    def validate(self, df: Any, now: datetime, rows: int) -> Validation:
        """GX's findings on `df` (`rows` rows, each with INDEX). Raises ValidatorError naming the rule GX could
        not evaluate, SelfTestFailed when GX on Spark no longer finds the self-test's failures."""
        if not self._tested:
            self.self_test(df.sparkSession)
            self._tested = True
        return _findings(self._batch(df), self.suite(now), self.rules, now, rows)

    def self_test(self, spark: Any) -> None:
        df = spark.sql(_SELFTEST_ROWS)
        found, cause = _self_test_finding(lambda suite, rules, now: _findings(self._batch(df), suite, rules, now, 6))
        if found is not None:
            import pyspark

            raise SelfTestFailed(f"the Great Expectations self-test on Spark failed ({found}); great-expectations "
                                 f"{gx.__version__}, pyspark {pyspark.__version__}: use the versions pinned in "
                                 "pyproject.toml") from cause
