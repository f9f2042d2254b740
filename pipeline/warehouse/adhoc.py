"""Ad hoc SQL (`pipeline sql`, `pipeline query`): one read statement, under a time limit.

- Only read statements run: DuckDB's own parser classifies the text
  (`extract_statements`), so SELECT, WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW,
  SUMMARIZE and EXPLAIN of one of those pass; CHECKPOINT, CREATE TEMP TABLE,
  SET, PRAGMA, CALL and more than one statement are refused.
- The statement runs in a worker thread while this (main) thread waits, so a
  time limit (`con.interrupt()`) and Ctrl-C both stop DuckDB at once: a
  Python signal handler cannot run while the main thread is inside DuckDB.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import duckdb

from pipeline.common.errors import StatementTimeout, UsageError, first_line

TIMEOUT_ENV = "PIPELINE_SQL_TIMEOUT"
DEFAULT_TIMEOUT_S = 5.0
READ_FORMS = "SELECT, WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN of one of them"
_JOIN_AFTER_INTERRUPT_S = 10.0


def default_timeout() -> float:
    from pipeline.warehouse.db import env_seconds

    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, zero="0 = no limit")


def _first_word(sql: str) -> str:
    for start, kind in duckdb.tokenize(sql):
        if kind != duckdb.token_type.comment:
            return sql[start:].split(None, 1)[0].upper()
    return ""


def _explained(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement | None:
    """The statement an EXPLAIN [ANALYZE] [(options)] wraps: the longest tail of the text that parses alone."""
    for start, _kind in duckdb.tokenize(sql)[1:]:
        try:
            inner = con.extract_statements(sql[start:])
        except duckdb.Error:
            continue
        return inner[0] if len(inner) == 1 else None
    return None


def check_read_statement(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """UsageError unless `sql` is exactly one read statement."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise UsageError(f"not valid SQL: {first_line(exc)}") from None
    if len(statements) != 1:
        raise UsageError(f"give exactly one statement, got {len(statements)}; allowed: {READ_FORMS}")
    statement = statements[0]
    checked = _explained(con, statement.query) if statement.type == duckdb.StatementType.EXPLAIN else statement
    if checked is None or checked.type != duckdb.StatementType.SELECT:
        shown = _first_word(checked.query) if checked is not None else "EXPLAIN"
        if statement is not checked:
            shown = f"EXPLAIN {shown}"
        raise UsageError(f"{shown} is refused: only read statements run here ({READ_FORMS})")


def _stop(con: duckdb.DuckDBPyConnection, worker: threading.Thread) -> None:
    """Interrupt the worker's statement until it ends (at most _JOIN_AFTER_INTERRUPT_S): an interrupt that
    lands before DuckDB has begun executing is lost, and the statement would then run on, holding the exit
    (seen once on a loaded machine: Ctrl-C after 0.2 s of a thread's CPU, and no exit in 30 s)."""
    deadline = time.monotonic() + _JOIN_AFTER_INTERRUPT_S
    while worker.is_alive() and time.monotonic() < deadline:
        con.interrupt()
        worker.join(0.05)


def run_limited(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None,
                timeout: float) -> tuple[list[str], list[tuple]]:
    """Columns and rows of `sql`; StatementTimeout after `timeout` s (0 = none);
    KeyboardInterrupt (Ctrl-C) interrupts DuckDB before it propagates."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            cursor = con.execute(sql, params) if params else con.execute(sql)
            columns = [d[0] for d in cursor.description] if cursor.description else []
            outcome["result"] = (columns, cursor.fetchall())
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="adhoc-sql", daemon=True)
    worker.start()
    try:
        worker.join(timeout or None)
    except KeyboardInterrupt:
        _stop(con, worker)
        raise
    if worker.is_alive():
        _stop(con, worker)
        raise StatementTimeout(f"the statement was stopped after {timeout:g} s, its time limit; "
                               f"allow longer with --timeout SECONDS or {TIMEOUT_ENV} (0 = no limit)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
