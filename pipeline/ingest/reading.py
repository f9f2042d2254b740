"""A landed Parquet file, read for ingest: its hash, a full read that checks its pages, and the
SELECT that casts its columns to the contract inside DuckDB.

Each file is judged on its own (schema drift is per file). It is rejected whole, with the reason:
- when it is unreadable, truncated, encrypted or not Parquet, or a page fails its checksum: the whole
  file is decoded by pyarrow, every page CRC checked (DuckDB checks none), before DuckDB reads it;
- when a required column is missing, or a column's type cannot hold the contract's (decided from
  the footer's types, before any row is read);
- when a value cannot be cast (an int32 out of range or with a fraction, an integer a double cannot
  hold exactly): DuckDB raises while staging the file, naming the column (sql/ingest/cast_macros.sql).

Accepted: strings (dictionary-encoded or not); timestamps in s, ms, µs or ns, naive (meaning UTC)
or zoned (converted to UTC), ns truncated to µs; integers or floats for int32 and float64 columns;
NaN in a float column reads as null; extra columns are ignored; an absent optional column is NULL.

`check` holds no rows (pyarrow's read streams). It runs in an isolated worker process (isolated.py),
ahead of the ingest; DuckDB then reads the file again, straight into the staging table.
"""

from __future__ import annotations

import glob
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.common.errors import first_line
from pipeline.ingest.parquet_pages import encrypted, encrypted_footer
from pipeline.ingest.rule_results import INDEX, STAGE, STAGED_FILE
from pipeline.warehouse.db import error_text
from pipeline.warehouse.schema import Column, Schema

_READ_ROWS = 65_536  # rows per record batch of the checked read
ENCRYPTED = "encrypted Parquet (not supported)"


@dataclass(frozen=True)
class Checked:
    """What reading a landed file found. `known`: its sha256 was already decided (not read further)."""

    path: Path
    sha: str
    size: int
    known: bool = False
    rows: int = 0  # the footer's count (0 when unreadable)
    reason: str | None = None  # why the file is rejected whole
    # per contract column: its position in the file (from 1) and its cast macro; (0, None) when absent
    casts: tuple[tuple[Column, int, str | None], ...] = ()
    extra: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    layout: str = ""  # the file's Arrow schema, fingerprinted: files alike are staged by one read


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def footer_rows(path: Path) -> int:
    """The row count the footer claims (0 when it is unreadable): the manifest's rows_read of a rejected file."""
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except MemoryError:
        raise
    except Exception:  # pyarrow raises ArrowInvalid, OSError and friends
        return 0


def _not_parquet(path: Path) -> str | None:
    """For a file that is not Parquet at all (a CSV, say): the reason, with how to convert it."""
    from pipeline.ingest.data_quality import convert_hint

    with path.open("rb") as fh:
        if path.suffix == ".parquet" or fh.read(4) == b"PAR1":
            return None  # Parquet, but damaged: pyarrow's message says how
    return f"not a Parquet file (no Parquet header); convert it first, e.g. {convert_hint(path)}"


def unreadable(path: Path, exc: Exception | str) -> str:
    """The rejection reason of a file pyarrow cannot read, or whose reader crashed (`exc`: how). A file whose
    plaintext footer names an encryption algorithm is told by its bytes: Arrow's reader aborts on some of
    those, and walking the footer in Python costs a millisecond a file, so it is done only here."""
    if encrypted(str(path)):
        return ENCRYPTED
    message = exc if isinstance(exc, str) else f"not a readable Parquet file: {first_line(exc)}"
    return _not_parquet(path) or message


def _decode_all(pf: pq.ParquetFile) -> None:
    """Decode every page (streamed, no rows kept): raises on damage a decoder finds."""
    for _ in pf.iter_batches(batch_size=_READ_ROWS):
        pass


def cast_macro(src: pa.DataType, col: Column) -> str:
    """The macro of sql/ingest/cast_macros.sql that turns a column of Arrow type `src` into `col`
    ('' when DuckDB reads it as the contract's type already). TypeError when no cast may."""
    if col.type == "string":
        if pa.types.is_dictionary(src):
            src = src.value_type
        if pa.types.is_string(src) or pa.types.is_large_string(src) or pa.types.is_string_view(src):
            return ""
        raise TypeError(f"is {src}, expected string")
    if col.type == "timestamp":
        if not pa.types.is_timestamp(src):
            raise TypeError(f"is {src}, expected a timestamp")
        return "ns_to_timestamp" if src.unit == "ns" else "to_timestamp"
    if col.type == "bool":
        if not pa.types.is_boolean(src):
            raise TypeError(f"is {src}, expected bool")
        return ""
    if pa.types.is_integer(src):
        return f"int_to_{col.type}"
    if pa.types.is_floating(src):
        return f"float_to_{col.type}"
    raise TypeError(f"is {src}, expected {col.type}")


def check(path: Path, schema: Schema, decided: set[str] | frozenset[str] = frozenset(),
          before_read: Callable[[Path], None] | None = None) -> Checked:
    """Hash the file; unless its sha256 is in `decided`, read it whole (pages checked) and plan its casts.
    `before_read` is called with the path just before a read (isolated.py's fault-injection hook)."""
    sha, size = sha256_of(path), path.stat().st_size
    if sha in decided:
        return Checked(path, sha, size, known=True)
    if before_read is not None:
        before_read(path)
    if encrypted_footer(str(path)):
        return Checked(path, sha, size, rows=0, reason=ENCRYPTED)
    try:  # a page written with a CRC is checked against it: a flipped bit must not load a wrong value
        pf = pq.ParquetFile(path, page_checksum_verification=True)
        _decode_all(pf)
    except MemoryError:  # the worker's memory limit (isolated.py) says so itself
        raise
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError and friends
        return Checked(path, sha, size, rows=footer_rows(path), reason=unreadable(path, exc))
    arrow_schema = pf.schema_arrow
    rows, fields = pf.metadata.num_rows, list(arrow_schema)
    position = {f.name: i for i, f in enumerate(fields, start=1)}
    missing_required = [n for n in schema.required if n not in position]
    if missing_required:
        reason = f"missing required column {', '.join(repr(n) for n in missing_required)}"
        return Checked(path, sha, size, rows=rows, reason=reason)
    casts: list[tuple[Column, int, str | None]] = []
    for col in schema.columns:
        if col.name not in position:
            casts.append((col, 0, None))
            continue
        try:
            casts.append((col, position[col.name], cast_macro(fields[position[col.name] - 1].type, col)))
        except TypeError as exc:
            reason = f"column {col.name!r} cannot be cast to {col.type}: {exc}"
            return Checked(path, sha, size, rows=rows, reason=reason)
    layout = hashlib.sha256(str(arrow_schema.remove_metadata()).encode()).hexdigest()
    return Checked(path, sha, size, rows=rows, casts=tuple(casts),
                   extra=[f.name for f in fields if f.name not in schema.names],
                   missing=[c.name for c, at, _ in casts if not at], layout=layout)


def select_sql(checked: Checked, n: int) -> str:
    """The SELECT that reads the files of group `n` of a staging statement, all laid out as `checked` is,
    as the contract's columns: the files' paths are the bound list `$path_n`; each file's rows are `_id`
    counted from its entry of `$first_n`, and carry its entry of `$file_n` as `_staged_file`. One read of
    many files costs about what their rows cost; a read per file costs milliseconds each.
    Columns are taken by position (`#3`): DuckDB matches names regardless of case, so a `Total_MS` beside
    `total_ms` would be read for it. Hive partitioning is off: DuckDB would otherwise replace a file's
    `release` column with the value of a `release=...` folder it lies in. A file with a column of a name
    the read adds (`_landed_file`, `file_row_number`) fails the statement, never misreads: the caller
    then reads each file alone and rejects that one."""
    columns = []
    for col, at, macro in checked.casts:
        name = '"' + col.name.replace('"', '""') + '"'
        if not at:
            columns.append(f"CAST(NULL AS {col.duckdb_type}) AS {name}")
        elif macro:
            label = "'" + col.name.replace("'", "''") + "'"
            columns.append(f"{STAGE}.{macro}(#{at}, {label}) AS {name}")
        else:
            columns.append(f"#{at} AS {name}")
    read = (f"SELECT {', '.join(columns)}, _landed_file, file_row_number "
            f"FROM read_parquet($path_{n}, file_row_number = true, filename = '_landed_file', "
            "hive_partitioning = false)")
    files = f"SELECT unnest($path_{n}) AS _landed_file, unnest($first_{n}) AS first, unnest($file_{n}) AS file"
    return (f"SELECT r.* EXCLUDE (_landed_file, file_row_number), f.first + r.file_row_number AS {INDEX}, "
            f"f.file AS {STAGED_FILE} FROM ({read}) r JOIN ({files}) f USING (_landed_file)")


def staging_error(exc: duckdb.Error) -> str:
    """Why DuckDB could not stage a file pyarrow decoded whole: a value the casts refuse (the message
    names the column), else DuckDB's own words."""
    text = error_text(exc)
    if text.startswith("column '") and " cannot be cast to " in text:
        return text
    return f"not a readable Parquet file: {text}"


def stage_table_sql(schema: Schema) -> str:
    """The staging table of a batch: the contract's columns, typed, `_id`, the row in the batch, and
    `_staged_file`, the file it came from."""
    columns = ", ".join(f'"{c.name}" {c.duckdb_type}' for c in schema.columns)
    return f"CREATE OR REPLACE TABLE {STAGE}.batch ({columns}, {INDEX} BIGINT, {STAGED_FILE} INTEGER)"


@contextmanager
def readable_paths(paths: list[Path]) -> Iterator[list[str]]:
    """Paths DuckDB reads as they are: it expands glob characters (`*`, `?`, `[`, `{`) in a path,
    so a file named with them is read through a link with a plain name in a private folder."""
    with tempfile.TemporaryDirectory(prefix="pipeline-ingest-") as links:
        out = []
        for i, path in enumerate(paths):
            real = os.path.abspath(path)
            if glob.has_magic(real) or "{" in real:
                link = os.path.join(links, f"{i}.parquet")
                os.symlink(real, link)
                real = link
            out.append(real)
        yield out
