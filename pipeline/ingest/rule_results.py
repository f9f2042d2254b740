"""What Great Expectations found, in our own types: free of GX imports, so the rest of
the pipeline reads GX's findings without depending on GX's result classes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

STAGE = "stage"  # the in-memory database attached to the ingest connection for the staging tables
INDEX = "_id"  # row number in a staging table: never event_id, which can be null or repeated
STAGED_FILE = "_staged_file"  # in a staging table: the file a row came from (its index in the run)
# the one rule ingest checks itself, beside the contract's (Great Expectations): a late row of a day whose raw
# events moved to the archive is quarantined (that day's rollups are final; pipeline/warehouse/archive.py)
DAY_ARCHIVED = "day_archived"
DAY_ARCHIVED_EXPECTATION = "its release's day is not yet in the archive (archive.raw_events_days)"


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
    failing_rows: dict[str, np.ndarray] = field(default_factory=dict)  # rule -> sorted staging row ids

    def split(self, sizes: list[int]) -> list[Validation]:
        """Per-file validations of a batch that concatenated files of these row counts."""
        out, start = [], 0
        for size in sizes:
            rows = {rule: idx[(idx >= start) & (idx < start + size)] - start
                    for rule, idx in self.failing_rows.items()}
            results = [RuleResult(r.rule, r.expectation, len(rows.get(r.rule, ())) == 0, size,
                                  len(rows.get(r.rule, ()))) for r in self.results]
            out.append(Validation(results, {rule: idx for rule, idx in rows.items() if len(idx)}))
            start += size
        return out

    def shifted(self, first: int, size: int) -> Validation:
        """The validation of one file whose rows had staging ids first..first+size-1, in file rows."""
        return Validation(self.results, {rule: idx - first for rule, idx in self.failing_rows.items()}).split([size])[0]

    def plus(self, rule: str, expectation: str, rows: np.ndarray, size: int) -> Validation:
        """This validation and one more rule of our own, broken by `rows` (file rows) of a file of `size` rows."""
        failing = {**self.failing_rows, rule: rows} if len(rows) else self.failing_rows
        return Validation([*self.results, RuleResult(rule, expectation, len(rows) == 0, size, len(rows))], failing)

    def rows_failing(self) -> int:
        """How many rows broke at least one rule (they are quarantined)."""
        found = [idx for idx in self.failing_rows.values() if len(idx)]
        return len(np.unique(np.concatenate(found))) if found else 0

    def failure_pairs(self, offset: int = 0) -> pa.Table:
        """(_id, rule, rule_pos) for every broken rule of every row; _id = row + offset."""
        rows, rules, pos = [], [], []
        order = {r.rule: i for i, r in enumerate(self.results)}
        for rule, idx in self.failing_rows.items():
            rows.append(idx.astype(np.int64) + offset)
            rules.append(np.full(len(idx), rule, dtype=object))
            pos.append(np.full(len(idx), order[rule], dtype=np.int32))
        if not rows:
            return pa.table({"_id": pa.array([], pa.int64()), "rule": pa.array([], pa.string()),
                             "rule_pos": pa.array([], pa.int32())})
        return pa.table({"_id": np.concatenate(rows), "rule": pa.array(np.concatenate(rules), pa.string()),
                         "rule_pos": np.concatenate(pos)})
