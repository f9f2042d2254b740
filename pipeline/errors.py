"""The pipeline's exceptions. Only cli.py turns them into exit codes.

    PipelineError            a known failure: one line for the user, exit 2
    ├── UsageError           unusable arguments (missing path, bad option value)
    ├── ConfigError          gates/*.yaml or a candidate file is invalid (names file and key)
    ├── DatabaseBusy         another process holds the database for writing
    ├── DatabaseError        the database cannot be opened or is not ours
    ├── UnknownRelease       --release names a release with no rows
    └── StatementTimeout     ad hoc SQL ran past its time limit (exit 124, like timeout(1))
    TransientError           worth retrying later (webhook down, timeout); never exit 1

Exit 1 is reserved for "this release must not keep the edge route" and is set by
the gate alone; every error here (StatementTimeout: 124), and any unexpected exception, exits 2.
"""


class PipelineError(Exception):
    exit_code = 2


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


class StatementTimeout(PipelineError):
    exit_code = 124


class TransientError(Exception):
    pass
