"""What Great Expectations found, in our own types: free of GX imports, so the
ingest process can receive them from the validation worker without loading GX."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa


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
