"""Every exit code of `pipeline`, defined once. The CLI returns these; a verdict's code is BY_VERDICT's, an error's
its class's `exit_code`; `pipeline --help` prints SUMMARY, and tests/test_layout.py checks the README's "Exit codes"
list against MEANING."""

from __future__ import annotations

from enum import IntEnum

from pipeline.common.vocabulary import Verdict


class Exit(IntEnum):
    OK = 0
    ROLLBACK = 1
    ERROR = 2
    INSUFFICIENT = 3
    DATA_QUALITY = 4
    SINK_FAILED = 5
    TIME_LIMIT = 124
    INTERRUPTED = 130


# the README's list, word for word
MEANING: dict[Exit, str] = {
    Exit.OK: "ok; for `gate`, `keep_edge`",
    Exit.ROLLBACK: "`gate` only, `partial_rollback` or `rollback_to_cloud`",
    Exit.ERROR: "a usage or input error (bad path, bad config, unknown release, database held by another writer), "
                "or any failure of the tool itself. A crash never exits 1.",
    Exit.INSUFFICIENT: "`gate` only, `insufficient_data`",
    Exit.DATA_QUALITY: "`nightly` and `ingest`, a data-quality alarm: the job ran, but files were rejected or too "
                       "many rows were quarantined, or (`nightly`) nothing new arrived for days (see "
                       "[docs/nightly.md](docs/nightly.md#data-quality-alarms))",
    Exit.SINK_FAILED: "`alerts test` only, a sink did not take the test alert (each sink's line says why)",
    Exit.TIME_LIMIT: "`sql` or `query`, the statement ran past its time limit and was stopped (as `timeout(1)` does)",
    Exit.INTERRUPTED: "`ingest` or `nightly` stopped by SIGTERM/SIGINT, any number of them, with whole files in; run "
                      "it again to finish. Also `sql` or `query` stopped by Ctrl-C.",
}

# `pipeline --help`'s one line
SUMMARY = ("exit codes: 0 ok / keep_edge, 1 rollback (gate only), 2 usage or input error or any failure, "
           "3 insufficient data (gate only), 4 data-quality alarm (nightly, ingest), 5 a sink refused (alerts "
           "test only), 124 sql/query time limit, 130 stopped by a signal")

BY_VERDICT: dict[Verdict, Exit] = {
    Verdict.KEEP_EDGE: Exit.OK, Verdict.PARTIAL_ROLLBACK: Exit.ROLLBACK,
    Verdict.ROLLBACK_TO_CLOUD: Exit.ROLLBACK, Verdict.INSUFFICIENT_DATA: Exit.INSUFFICIENT,
}
