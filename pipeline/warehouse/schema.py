"""The telemetry contract, loaded once from schemas/telemetry_event.yaml.

Everything that knows a column or a row rule reads it from here: the Arrow cast
schema (ingest), the DuckDB DDL (db), and the row rules that validate.py turns
into Great Expectations expectations.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.common import package_data
from pipeline.common.yamlspec import load_yaml

SCHEMA_PATH = package_data.folder("schemas") / "telemetry_event.yaml"

ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "bool": pa.bool_(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "timestamp": pa.timestamp("us"),  # stored naive, meaning UTC
}
DUCKDB_TYPES = {
    "string": "VARCHAR",
    "bool": "BOOLEAN",
    "int32": "INTEGER",
    "float64": "DOUBLE",
    "timestamp": "TIMESTAMP",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    enum: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None

    @property
    def arrow_type(self) -> pa.DataType:
        return ARROW_TYPES[self.type]

    @property
    def duckdb_type(self) -> str:
        return DUCKDB_TYPES[self.type]


@dataclass(frozen=True)
class Rule:
    """One row rule. `kind` says which check; the other fields are its arguments."""

    name: str
    kind: str  # not_null | in_set | in_range | a_le_b | not_after_ingest | forbidden_when
    column: str | None = None
    args: tuple[tuple[str, Any], ...] = ()

    def arg(self, key: str) -> Any:
        return dict(self.args)[key]


@dataclass(frozen=True)
class Schema:
    version: int
    dedupe_key: str
    columns: tuple[Column, ...]
    rules: tuple[Rule, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def required(self) -> list[str]:
        return [c.name for c in self.columns if not c.nullable]

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=True) for c in self.columns])


def _column_rules(col: Column) -> list[Rule]:
    rules = []
    if not col.nullable:
        rules.append(Rule(f"{col.name}_not_null", "not_null", col.name))
    if col.enum is not None:
        rules.append(Rule(f"{col.name}_in_set", "in_set", col.name, (("values", col.enum),)))
    if col.min is not None or col.max is not None:
        rules.append(Rule(f"{col.name}_in_range", "in_range", col.name, (("min", col.min), ("max", col.max))))
    return rules


def _cross_rule(raw: dict[str, Any]) -> Rule:
    raw = dict(raw)
    name, kind = raw.pop("name"), raw.pop("kind")
    column = raw.pop("column", None)
    return Rule(name, kind, column, tuple(sorted(raw.items())))


@cache
def load_schema(path: Path = SCHEMA_PATH) -> Schema:
    raw = load_yaml(path.read_text())
    columns = tuple(
        Column(
            name=c["name"],
            type=c["type"],
            nullable=bool(c["nullable"]),
            enum=tuple(c["enum"]) if "enum" in c else None,
            min=c.get("min"),
            max=c.get("max"),
        )
        for c in raw["columns"]
    )
    for c in columns:
        if c.type not in ARROW_TYPES:
            raise ValueError(f"{path}: column {c.name}: unknown type {c.type!r}")
    rules = [r for c in columns for r in _column_rules(c)]
    rules += [_cross_rule(r) for r in raw.get("rules", [])]
    return Schema(int(raw["version"]), raw["dedupe_key"], columns, tuple(rules))
