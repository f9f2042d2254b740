"""The warehouse as polars DataFrames, for notebooks: `pipeline.open("telemetry.duckdb")`.

    import pipeline
    wh = pipeline.open("telemetry.duckdb")
    wh.fallback_rate(release="4.12", by=["network_bucket"])   # edge next to cloud, per bucket
    wh.segments("4.12", as_of="2026-12-01")                    # the gate's verdict per segment
    wh.evaluations("4.12")                                     # what earlier runs decided, newest first
    wh.quarantine()                                            # quarantined rows per broken rule and file
    wh.events(release="4.12", since="2026-10-01")              # raw events, archived days included
    wh.query("edge_vs_cloud_latency", release="4.12")          # any named query of sql/queries/

Every method opens the warehouse read-only for its own query and closes it, so a notebook never holds the
file against the nightly writer. The SQL is the named queries' (sql/queries/) and the gate's own: a frame
holds what `pipeline query ... --format json` and `pipeline gate --json` print. DuckDB hands over Arrow,
which polars takes without a copy.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.common import clock
from pipeline.common.config import Config, load_config
from pipeline.common.errors import UsageError
from pipeline.warehouse import archive, db, snapshots, sqlfiles
from pipeline.warehouse.aggregate import use_settings

__all__ = ["WarehouseFrames"]  # what pipeline.open returns; its public methods are docs/querying.md's

FALLBACK_DIMENSIONS = ("release", "day", "device_tier", "network_bucket")  # what fallback_rate's query keeps


class WarehouseFrames:
    """A warehouse file, read through polars. `config`: the gates' YAML (default: the shipped one), which
    also sets the derived fields (network buckets) the queries read."""

    def __init__(self, path: str | Path, config: str | Path | None = None):
        self.path = Path(path)
        self.config: Config = load_config(Path(config) if config else None)
        db.require_folder(self.path)
        if not self.path.exists():
            raise UsageError(f"{self.path}: no warehouse here (run `pipeline nightly` or `pipeline ingest` first)")

    def _frame(self, sql: str, params: dict[str, Any]) -> pl.DataFrame:
        raw = snapshots.reads_raw_rows(sql)  # all_events and all_quarantine are among the raw readers
        with db.reading(self.path, raw=raw) as con:
            use_settings(con, self.config)
            if raw:
                archive.register(con, self.path, self.config)
            return pl.from_arrow(con.sql(sql, params=params).to_arrow_table())  # type: ignore[return-value]

    def events(self, release: str | None = None, since: str | None = None, until: str | None = None) -> pl.DataFrame:
        """Raw events of days [since, until), from the file and from the archive alike (docs/archive.md)."""
        q = sqlfiles.sql_file("archive/events")
        return self._frame(q.text, sqlfiles.query_params(q, {"release": release, "since": since, "until": until}))

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        """A named query of sql/queries/ (`pipeline query --list`), its params as keywords."""
        q = sqlfiles.named_query(name)
        return self._frame(q.text, sqlfiles.query_params(q, params))

    def fallback_rate(self, release: str | None = None, since: str | None = None,
                      by: list[str] | tuple[str, ...] = ("release", "network_bucket")) -> pl.DataFrame:
        """Fallback and automatic-fallback rates, edge next to cloud, over the dimensions in `by` (any of
        release, day, device_tier, network_bucket): the rollup's daily rates weighted by their rows."""
        wrong = [d for d in by if d not in FALLBACK_DIMENSIONS]
        if wrong:
            raise UsageError(f"fallback_rate(by=...): {wrong[0]!r} is not one of {', '.join(FALLBACK_DIMENSIONS)}")
        daily = self.query("fallback_rate", release=release, since=since)
        keys = [*by, "side"]
        return (daily.group_by(keys)
                .agg(pl.col("rows").sum().cast(pl.Int64),
                     ((pl.col("fallback_rate") * pl.col("rows")).sum() / pl.col("rows").sum())
                     .round(4).alias("fallback_rate"),
                     ((pl.col("auto_fallback_rate") * pl.col("rows")).sum() / pl.col("rows").sum())
                     .round(4).alias("auto_fallback_rate"))
                .sort(keys))

    def segments(self, release: str, as_of: str | datetime | None = None) -> pl.DataFrame:
        """The gate's verdict per segment, as `pipeline gate --release R --json` gives it (nothing is recorded):
        one row per segment with its decision and failed gates, and per gate its status, measured value,
        threshold and decision interval (`<gate>_status`, `<gate>_measured`, ...)."""
        from pipeline.gate.evaluate import evaluate_gate, require_release

        when = clock.parse(as_of) if isinstance(as_of, str) else as_of
        with db.reading(self.path) as con:
            use_settings(con, self.config)
            require_release(con, release)
            result = evaluate_gate(con, release, self.config, as_of=when)
        rows = []
        for seg in result.to_dict()["segments"]:
            row = {k: seg[k] for k in ("task", "device_tier", "network_bucket", "rows", "decision")}
            row["failed_gates"] = seg["failed_gates"]
            for gate, check in seg["metrics"].items():
                row |= {f"{gate}_{k}": check.get(k) for k in ("status", "measured", "threshold")}
                row[f"{gate}_interval"] = check.get("interval")
            rows.append(row)
        return pl.DataFrame(rows, infer_schema_length=None)

    def evaluations(self, release: str, limit: int = 100) -> pl.DataFrame:
        """The verdicts recorded for `release` by earlier runs (nightly, gate), newest first, as `pipeline
        history` lists them, with the people's overrides in force at each (`overrides`)."""
        from pipeline.rollout.actions import recorded
        from pipeline.rollout.history import history

        with db.reading(self.path) as con:
            columns, rows = history(con, release, limit, recorded(con, release, self.path))
        naive = [[v.replace(tzinfo=None) if isinstance(v, datetime) else v for v in r] for r in rows]  # UTC
        return pl.DataFrame(naive, schema=columns, orient="row", infer_schema_length=None)

    def quarantine(self, release: str | None = None) -> pl.DataFrame:
        """Quarantined rows per broken rule and source file."""
        return self.query("quarantine_reasons", release=release)
