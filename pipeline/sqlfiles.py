"""SQL lives in sql/ as files; this module finds them by name and runs them.

Each file starts with a header:
    -- name: fallback_rate
    -- description: one line for `pipeline query --list`
    -- params: release, day (optional)
User values reach SQL only as bound parameters ($name in DuckDB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from pipeline import package_data

SQL_DIR = package_data.folder("sql")


@dataclass(frozen=True)
class SqlFile:
    name: str
    path: Path
    description: str
    params: tuple[str, ...]
    text: str


def _parse(path: Path) -> SqlFile:
    text = path.read_text()
    header: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        key, _, value = line[2:].strip().partition(":")
        if value:
            header[key.strip()] = value.strip()
    # "release, since (optional, ISO date)": names, each with an optional note in parentheses
    params = tuple(m.group(0).strip() for m in re.finditer(r"\w+(\s*\([^)]*\))?", header.get("params", "")))
    return SqlFile(header.get("name", path.stem), path, header.get("description", ""), params, text)


@cache
def sql_file(relname: str) -> SqlFile:
    """`relname` is a path under sql/ without the suffix, e.g. 'ingest/insert_events'."""
    return _parse(SQL_DIR / f"{relname}.sql")


def list_folder(folder: str) -> list[SqlFile]:
    return [_parse(p) for p in sorted((SQL_DIR / folder).glob("*.sql"))]


def param_names(sf: SqlFile) -> list[str]:
    """Names of the params, without the '(optional)' notes of the header."""
    return [p.split()[0] for p in sf.params]


def required_params(sf: SqlFile) -> list[str]:
    return [p.split()[0] for p in sf.params if "optional" not in p]


def run(con: duckdb.DuckDBPyConnection, relname: str, params: dict[str, Any] | None = None):
    """Execute one sql/ file with bound parameters; returns the connection's result."""
    sf = sql_file(relname)
    return con.execute(sf.text, params or {}) if params else con.execute(sf.text)
