"""Telemetry ingestion and rollback gate for on-device language models.

The packages follow the data, from the landed file to the people who act on a verdict; each imports
only from the ones above it in this list (tests/test_layout.py holds the rule):

    common      errors, clock, logging, stops, YAML, packaged data, the gate registry and the config
    warehouse   the contract, DuckDB connections and the writer lock, SQL files, runs, the rollup, engines
    ingest      landing -> isolated reading -> Great Expectations -> the manifest, quarantine, dedupe
    gate        each segment against the admission thresholds: measurement, statistics, decisions
    rollout     the state a verdict changes: rollout state, routing files, the history of evaluations
    views       tables, terminal views and the HTML report
    delivery    alerts: the outbox and its sinks
    planning    admission of new tasks, the ledger and its estimates, backtests, the simulator
    jobs        the nightly job and its scheduler
    cli         the `pipeline` command
"""

__version__ = "0.1.0"
