"""Rows as a table for people, or CSV / JSON for programs: query results, history, the ledger."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

FORMATS = ("table", "csv", "json")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """'1 file', '2 files', '0 releases': a count and its noun, agreeing."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e15 else repr(value)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, list | tuple):  # words for people and CSV, never a Python repr
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, default=str, separators=(",", ":"))
    return str(value)


WIDEST_CELL = 60  # a table cell past this is cut with "..." (CSV and JSON carry it whole)


def _clipped(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= WIDEST_CELL else text[:WIDEST_CELL - 3] + "..."


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def rows_as(fmt: str, columns: list[str], rows: list[tuple]) -> str:
    if fmt == "json":
        return json.dumps([{c: _jsonable(v) for c, v in zip(columns, r, strict=True)} for r in rows], indent=1)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in r] for r in rows])
        return out.getvalue().rstrip("\n")
    text = [[_clipped(_cell(v)) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r[i], int | float | Decimal) or r[i] is None for r in rows) for i in range(len(columns))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(cells, widths, numeric, strict=True)).rstrip()

    lines = [line(columns), line(["-" * w for w in widths])] + [line(r) for r in text]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)
