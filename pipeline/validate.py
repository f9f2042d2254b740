"""Row validation with Great Expectations, the validator of record.

The only module that imports Great Expectations. It turns the row rules of
schemas/telemetry_event.yaml into one expectation suite and returns, per rule,
GX's own counts and the row numbers it found breaking the rule.

Cost is what shaped this file (bench/ingest.py measures it):
- one suite run per file in SUMMARY format; COMPLETE (which lists failing row
  indices and is far slower) only for the expectations that found failures;
- GX is handed only the columns the rules read, low-cardinality strings as
  categoricals (GX hashes and filters the whole frame per expectation), int32 as
  int64 and event_time as epoch microseconds: GX vectorises "between" only for
  int64/float64 and ns datetimes, and ns datetimes overflow after 2262, so any
  other dtype falls back to a per-value Python loop.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.schema import Rule, Schema

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import great_expectations as gx  # noqa: E402  (the env var must be set first)
import great_expectations.expectations as gxe  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.expectations.row_conditions import Column as GxColumn  # noqa: E402

logging.getLogger("great_expectations").setLevel(logging.ERROR)

# Strings GX gets as categoricals: the enums plus these few-valued columns.
_FEW_VALUED = {"release", "app_version", "task"}


class ValidatorError(Exception):
    """GX could not evaluate a rule on this file (not "rows broke it")."""


@dataclass(frozen=True)
class RuleResult:
    rule: str
    expectation: str
    success: bool
    element_count: int
    unexpected_count: int


@dataclass
class Validation:
    results: list[RuleResult]
    failing_rows: dict[str, np.ndarray] = field(default_factory=dict)  # rule -> row numbers

    def failure_pairs(self) -> pa.Table:
        """(row, rule, rule_pos) for every broken rule of every row."""
        rows, rules, pos = [], [], []
        order = {r.rule: i for i, r in enumerate(self.results)}
        for rule, idx in self.failing_rows.items():
            rows.append(idx.astype(np.int64))
            rules.append(np.full(len(idx), rule, dtype=object))
            pos.append(np.full(len(idx), order[rule], dtype=np.int32))
        if not rows:
            return pa.table({"_row": pa.array([], pa.int64()), "rule": pa.array([], pa.string()),
                             "rule_pos": pa.array([], pa.int32())})
        return pa.table({"_row": np.concatenate(rows), "rule": pa.array(np.concatenate(rules), pa.string()),
                         "rule_pos": np.concatenate(pos)})


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
    """One GX context and suite, reused for every file of a run."""

    def __init__(self, schema: Schema, now: datetime):
        self.schema = schema
        self.columns = _columns_read(schema.rules)
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        asset = self.context.data_sources.add_pandas("telemetry").add_dataframe_asset("file")
        self.batch_definition = asset.add_batch_definition_whole_dataframe("whole_file")
        self.now = now
        self.rules = {r.name: r for r in schema.rules}
        self.suite = gx.ExpectationSuite(
            name=f"telemetry_event_v{schema.version}",
            expectations=[_expectation(r, now) for r in schema.rules],
        )

    def _frame(self, table: pa.Table) -> Any:
        cols = {}
        for name in self.columns:
            col = self.schema.column(name)
            arr = table[name]
            if col.type == "string" and (col.enum is not None or name in _FEW_VALUED):
                arr = arr.dictionary_encode()
            elif col.type == "int32":
                arr = arr.cast(pa.int64())
            elif col.type == "timestamp":
                arr = arr.cast(pa.int64())  # epoch µs, see the module docstring
            cols[name] = arr
        return pa.table(cols).to_pandas()

    def _run(self, frame: Any, suite: Any, result_format: Any) -> Any:
        batch = self.batch_definition.get_batch(batch_parameters={"dataframe": frame})
        return batch.validate(suite, result_format=result_format)

    def validate(self, table: pa.Table) -> Validation:
        frame = self._frame(table)
        summary = self._run(frame, self.suite, "SUMMARY")
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
                name="failed_rules", expectations=[_expectation(self.rules[r], self.now) for r in failed]
            )
            complete = self._run(frame, suite, {"result_format": "COMPLETE", "partial_unexpected_count": 0})
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
