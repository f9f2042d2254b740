"""SQL lives in sql/ as files; this module finds them by name and runs them.

Each file starts with a header:
    -- name: fallback_rate
    -- description: one line for `pipeline query --list`
    -- params: release, day (optional, date), limit (optional, integer)
User values reach SQL only as bound parameters ($name in DuckDB). A param's note may
name its type (date, timestamp, integer, number; text when none is named): `pipeline
query` checks a value against it before the SQL runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from pipeline.common import package_data
from pipeline.common.errors import UsageError
from pipeline.common.vocabulary import Bucket

SQL_DIR = package_data.folder("sql")
# words of common/vocabulary.py a SQL file names as $parameters instead of writing them out; bound by run() and
# arrow() when the file uses them
WORDS = {"bucket_offline": Bucket.OFFLINE.value, "bucket_weak": Bucket.WEAK.value}


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


# type named in a param's note -> (parse the text, the expected form for the error)
PARAM_TYPES: dict[str, tuple[Any, str]] = {
    "date": (date.fromisoformat, "an ISO date such as 2026-11-24"),
    "timestamp": (lambda v: datetime.fromisoformat(v.replace("Z", "+00:00")),
                  "an ISO date or time such as 2026-11-24T02:00"),
    "integer": (int, "a whole number such as 50"),
    "number": (float, "a number such as 0.05"),
}


def param_types(sf: SqlFile) -> dict[str, str]:
    """Each param's declared type: the first word of its note that names one, else 'text'."""
    types = {}
    for p in sf.params:
        note = re.findall(r"\w+", p.partition("(")[2])
        types[p.split()[0]] = next((w for w in note if w in PARAM_TYPES), "text")
    return types


def named_query(name: str, hint: str = "") -> SqlFile:
    """A query of sql/queries/ by name (`pipeline query` and the notebook API's query() both look it up
    here); UsageError naming the known ones, and `hint` where to see them."""
    queries = {q.name: q for q in list_folder("queries")}
    if name not in queries:
        raise UsageError(f"no query {name!r}; {hint or 'known: '}{', '.join(queries)}{')' if hint else ''}")
    return queries[name]


def query_params(sf: SqlFile, given: dict[str, Any], spelled: str = "{}=...") -> dict[str, Any]:
    """`given` bound to the query's parameters: none unknown, every required one set (`spelled` how a
    parameter is written where the user sets it), the others None."""
    names = param_names(sf)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UsageError(f"query {sf.name}: no param {unknown[0]!r}; it takes {', '.join(names) or 'none'}")
    missing = [p for p in required_params(sf) if given.get(p) is None]
    if missing:
        raise UsageError(f"query {sf.name} needs {spelled.format(missing[0])}")
    return {n: None for n in names} | given


def convert_params(sf: SqlFile, values: dict[str, str]) -> dict[str, Any]:
    """Text values from the command line as their declared types; UsageError names the param and the form."""
    types = param_types(sf)
    out: dict[str, Any] = {}
    for name, text in values.items():
        kind = types.get(name, "text")
        if kind == "text":
            out[name] = text
            continue
        parse, form = PARAM_TYPES[kind]
        try:
            out[name] = parse(text.strip())
        except ValueError:
            raise UsageError(f"--param {name}={text!r}: query {sf.name} expects {name} as {form}") from None
    return out


def with_words(sf: SqlFile, params: dict[str, Any] | None) -> dict[str, Any]:
    """`params`, and the vocabulary's words the file names (`$bucket_offline`, ...: WORDS)."""
    return {**{k: v for k, v in WORDS.items() if f"${k}" in sf.text}, **(params or {})}


def run(con: duckdb.DuckDBPyConnection | Any, relname: str, params: dict[str, Any] | None = None):
    """Execute one sql/ file with bound parameters; returns a cursor-like result (description, fetchall,
    fetchone). `con` is a DuckDB connection or an engine of pipeline/warehouse/engine.py (Spark runs the file
    transpiled): the caller does not know which."""
    sf = sql_file(relname)
    params = with_words(sf, params)
    runner = getattr(con, "run_sql_file", None)
    if runner is not None:
        return runner(relname, params)
    return con.execute(sf.text, params) if params else con.execute(sf.text)


def dicts(con: duckdb.DuckDBPyConnection | Any, relname: str, params: dict[str, Any] | None = None) -> list[dict]:
    """One sql/ file's rows as dicts by column name, on DuckDB or on an engine of pipeline/warehouse/engine.py."""
    cur = run(con, relname, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def arrow(con: duckdb.DuckDBPyConnection | Any, relname: str, params: dict[str, Any] | None = None) -> Any:
    """One sql/ file's rows as an Arrow table, on DuckDB or on an engine of pipeline/warehouse/engine.py."""
    sf = sql_file(relname)
    params = with_words(sf, params)
    runner = getattr(con, "arrow_sql_file", None)
    if runner is not None:
        return runner(relname, params)
    return con.sql(sf.text, params=params).to_arrow_table()


def view(con: duckdb.DuckDBPyConnection | Any, relname: str, name: str) -> None:
    """One sql/ file's query (no parameters) as the temporary view `name`, which the files run after it read,
    on DuckDB or on an engine of pipeline/warehouse/engine.py."""
    viewer = getattr(con, "view_sql_file", None)
    if viewer is not None:
        viewer(relname, name)
        return
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS\n{sql_file(relname).text}")
