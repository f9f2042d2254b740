"""Telemetry ingestion and rollback gate for on-device language models.

The packages follow the data, from the landed file to the people who act on a verdict; each imports
only from the ones above it in this list (tests/test_layout.py holds the rule):

    common      errors, clock, logging, stops, YAML, packaged data, the gate registry, the vocabulary, the config
    warehouse   the contract, DuckDB connections, the writer lock and the run's handle, SQL files, the rollup
    ingest      landing -> isolated reading -> Great Expectations -> the manifest, quarantine, dedupe
    gate        each segment against the admission thresholds: measurement, statistics, decisions
    rollout     the state a verdict changes: rollout state, routing files, the history of evaluations
    planning    admission of new tasks, the ledger and its estimates, backtests, the simulator
    views       terminal views, the HTML report and the notebook API (polars)
    delivery    alerts (the outbox and its sinks), the routing table published, pipeline serve
    jobs        the nightly job and its scheduler
    cli         the `pipeline` command
"""


__all__ = ["__version__", "open"]  # the notebook API (docs/querying.md); the command is pipeline.cli.main


def _installed_version() -> str:
    """The one version: the installed distribution's (pyproject.toml's), stored with every evaluation."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("edge-telemetry-pipeline")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


__version__ = _installed_version()


def open(path: str, config: str | None = None):  # noqa: A001 (pipeline.open, as the notebook API reads)
    """The warehouse at `path` as polars DataFrames (pipeline/views/frames.py); read-only, a connection per call.
    Imported here on first use, so `pipeline --help` does not pay for polars."""
    from pipeline.views.frames import WarehouseFrames

    return WarehouseFrames(path, config)
