"""The pipeline's exceptions. Only the CLI (pipeline/cli/main.py) turns them into exit codes, each class's
`exit_code` from pipeline/common/exit_codes.py.

    PipelineError            a known failure: one line for the user, exit 2
    ├── UsageError           unusable arguments (missing path, bad option value)
    ├── ConfigError          gates/*.yaml or a candidate file is invalid (names file and key)
    ├── DatabaseBusy         another process holds the database for writing
    ├── DatabaseError        the database cannot be opened or is not ours
    ├── UnknownRelease       --release names a release with no rows
    ├── BucketError          an object-store landing failed for good (names the bucket and key, never a secret)
    ├── EngineError          the Spark engine failed a query (names the sql/ file and Spark's error class)
    ├── StatementTimeout     ad hoc SQL ran past its time limit (exit 124, like timeout(1))
    └── (TransientError)     not a PipelineError: worth retrying later (webhook down, timeout); the nightly job
                             records it and exits 2, never 1

Exit 1 is reserved for "this release must not keep the edge route" and is set by
the gate alone; every error here (StatementTimeout: 124), and any unexpected exception, exits 2.
"""

from pipeline.common.exit_codes import Exit

__all__ = ["PipelineError", "UsageError", "ConfigError", "DatabaseBusy", "DatabaseError", "UnknownRelease",
           "BucketError", "EngineError", "StatementTimeout", "TransientError", "first_line", "yaml_problem",
           "duckdb_problem"]


class PipelineError(Exception):
    exit_code = Exit.ERROR


class UsageError(PipelineError):
    pass


class ConfigError(PipelineError):
    pass


class DatabaseBusy(PipelineError):
    pass


class DatabaseError(PipelineError):
    pass


class UnknownRelease(PipelineError):
    pass


class BucketError(PipelineError):
    pass


class EngineError(PipelineError):
    pass


class StatementTimeout(PipelineError):
    exit_code = Exit.TIME_LIMIT


class TransientError(Exception):
    pass


def first_line(exc: BaseException) -> str:
    """An exception's message as one line: its first line, else the exception's type name."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def yaml_problem(exc: Exception) -> str:
    """A YAML syntax error (yaml.MarkedYAMLError) as one line with its line and column, counted from 1."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"not valid YAML{where}: {problem}"


def duckdb_problem(exc: Exception) -> str:
    """DuckDB's message on one line: its first line plus its hint (`Did you mean "events"?`), without the
    LINE/caret excerpt of the query."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    hints = [ln for ln in lines[1:] if ln.lower().startswith(("did you mean", "candidate", "hint"))]
    return " ".join(lines[:1] + hints) or type(exc).__name__
