"""Row validation with Great Expectations, the validator of record.

The only module that imports Great Expectations. It turns the row rules of
schemas/telemetry_event.yaml into one expectation suite and returns, per rule,
GX's own counts and the row numbers it found breaking the rule.

Cost is what shaped this file (bench/ingest.py measures it):
- one suite run per batch of files in SUMMARY format; COMPLETE (which lists
  failing row indices and is far slower) only for the expectations that found
  failures;
- GX is handed only the columns the rules read, few-valued strings as
  categoricals (GX hashes and filters the whole frame per expectation), int32
  as int64 and event_time as epoch microseconds: GX vectorises "between" only for
  int64/float64 and ns datetimes, and ns datetimes overflow after 2262, so any
  other dtype falls back to a per-value Python loop.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.rule_results import RuleResult, Validation, ValidatorError
from pipeline.schema import Rule, Schema

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import great_expectations as gx  # noqa: E402  (the env var must be set first)
import great_expectations.expectations as gxe  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.expectations.row_conditions import Column as GxColumn  # noqa: E402

logging.getLogger("great_expectations").setLevel(logging.ERROR)

try:  # GX fingerprints every pandas batch below 1 GB by hashing all of it, for metadata
    # we never read; skipping it halves the cost of a run (bench/ingest.py).
    from great_expectations.execution_engine import pandas_execution_engine as _gx_pandas

    _gx_pandas.HASH_THRESHOLD = 0
except (ImportError, AttributeError):
    pass


def _epoch_us(value: datetime) -> int:
    return int((value - datetime(1970, 1, 1)) / timedelta(microseconds=1))


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
        return gxe.ExpectColumnValuesToBeBetween(column=rule.column, max_value=_epoch_us(bound), meta=meta)
    if rule.kind == "forbidden_when":
        return gxe.ExpectColumnValuesToNotBeInSet(
            column=rule.column, value_set=[rule.arg("forbidden_value")],
            row_condition=GxColumn(rule.arg("when_column")) == rule.arg("when_value"), meta=meta,
        )
    raise ValueError(f"unknown rule kind {rule.kind!r} for rule {rule.name}")


def _few_valued(arr: pa.ChunkedArray, sample: int = 2000, limit: int = 200) -> bool:
    """Categoricals pay off for enums and the like; for ids, encoding costs more than it saves."""
    return pc.count_distinct(arr.slice(0, sample)).as_py() <= limit


def _columns_read(rules: tuple[Rule, ...]) -> list[str]:
    names: list[str] = []
    for r in rules:
        for key in ("a", "b", "when_column"):
            if key in dict(r.args):
                names.append(r.arg(key))
        if r.column:
            names.append(r.column)
    return list(dict.fromkeys(names))


class Validator:
    """One GX context, reused for every batch a process validates."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.columns = _columns_read(schema.rules)
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        asset = self.context.data_sources.add_pandas("telemetry").add_dataframe_asset("file")
        self.batch_definition = asset.add_batch_definition_whole_dataframe("whole_file")
        self.rules = {r.name: r for r in schema.rules}
        self._suites: dict[datetime, Any] = {}

    def suite(self, now: datetime) -> Any:
        """The whole suite; `now` is the ingestion time the event_time rule is bound to."""
        if now not in self._suites:
            self._suites[now] = gx.ExpectationSuite(
                name=f"telemetry_event_v{self.schema.version}",
                expectations=[_expectation(r, now) for r in self.schema.rules],
            )
        return self._suites[now]

    def _frame(self, table: pa.Table) -> Any:
        cols = {}
        for name in self.columns:
            col = self.schema.column(name)
            arr = table[name]
            if col.type == "string" and _few_valued(arr):
                arr = arr.dictionary_encode()
            elif col.type == "int32":
                arr = arr.cast(pa.int64())
            elif col.type == "timestamp":
                arr = arr.cast(pa.int64())  # epoch µs, see the module docstring
            cols[name] = arr
        return pa.table(cols).to_pandas()

    def validate(self, table: pa.Table, now: datetime) -> Validation:
        frame = self._frame(table)
        batch = self.batch_definition.get_batch(batch_parameters={"dataframe": frame})
        summary = batch.validate(self.suite(now), result_format="SUMMARY")
        results, failed = [], []
        for res in summary.results:
            rule = res.expectation_config.meta["rule"]
            exc = res.exception_info or {}
            if exc.get("raised_exception") or res.result.get("unexpected_count") is None:
                message = str(exc.get("exception_message") or "no result").splitlines()[0]
                raise ValidatorError(f"rule {rule}: Great Expectations could not evaluate it: {message}")
            count = int(res.result["unexpected_count"])
            results.append(RuleResult(rule, res.expectation_config.type, bool(res.success),
                                      int(res.result.get("element_count") or len(frame)), count))
            if count:
                failed.append(rule)
        validation = Validation(results)
        if failed:
            suite = gx.ExpectationSuite(
                name="failed_rules", expectations=[_expectation(self.rules[r], now) for r in failed]
            )
            complete = batch.validate(suite, result_format={"result_format": "COMPLETE", "partial_unexpected_count": 0})
            expected = {r.rule: r.unexpected_count for r in results}
            for res in complete.results:
                rule = res.expectation_config.meta["rule"]
                idx = np.asarray(res.result.get("unexpected_index_list") or [], dtype=np.int64)
                if len(idx) != expected[rule]:
                    raise ValidatorError(
                        f"rule {rule}: Great Expectations counted {expected[rule]} failing rows "
                        f"but listed {len(idx)}"
                    )
                validation.failing_rows[rule] = idx
        return validation
