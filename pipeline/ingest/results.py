"""What an ingest run did, per landed file (or object) and in total: the summary people read and the JSON
`pipeline ingest --json` prints (schemas/output/ingest.schema.json)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.common.output_schema import SCHEMA_VERSION
from pipeline.common.tables import counted
from pipeline.ingest.landing import shown

# loaded | rejected | skipped (its bytes were ingested before) | refused (outside the landing folder: never
# opened) | vanished (an object deleted between its listing and its read)
STATUSES = ("loaded", "rejected", "skipped", "refused", "vanished")


@dataclass
class FileResult:
    path: str
    status: str  # one of STATUSES
    rows_read: int = 0
    accepted: int = 0
    quarantined: int = 0
    duplicates: int = 0
    reason: str | None = None
    extra_columns: list[str] = field(default_factory=list)
    missing_columns: list[str] = field(default_factory=list)
    landed_at: str | None = None  # a loaded file's mtime (a bucket object's LastModified), UTC ISO


def landed_at(path: str | Path) -> str | None:
    """When a landed file was written (its mtime; a fetched object's copy carries the object's), UTC ISO."""
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OSError:
        return None


@dataclass
class SourceListing:
    """One object-store landing of the run (pipeline/ingest/from_bucket.py): what its listing found."""

    uri: str
    start_after: str  # where the listing began ('' = the whole prefix)
    listed: int = 0  # Parquet objects listed
    already_read: int = 0  # of those, objects whose (key, size, etag) was read before: not fetched
    not_parquet: int = 0  # other objects under the prefix (never read)
    not_parquet_examples: list[str] = field(default_factory=list)
    last_key: str = ""  # the last Parquet key listed: where the next listing's date folder is found

    def __str__(self) -> str:
        where = f"from after {shown(self.start_after)!r}" if self.start_after else "whole prefix"
        other = f"; {self.not_parquet} not Parquet (not read)" if self.not_parquet else ""
        return (f"{self.uri}: listed {self.listed} Parquet objects ({where}): {self.listed - self.already_read} "
                f"fetched, {self.already_read} read before{other}")


@dataclass
class IngestResult:
    files: list[FileResult] = field(default_factory=list)
    sources: list[SourceListing] = field(default_factory=list)

    def _sum(self, key: str) -> int:
        return sum(getattr(f, key) for f in self.files)

    @property
    def accepted(self) -> int:
        return self._sum("accepted")

    def to_dict(self) -> dict[str, Any]:
        def listed(status: str) -> list[dict[str, str | None]]:
            return [{"path": f.path, "reason": f.reason} for f in self.files if f.status == status]

        return {
            "schema_version": SCHEMA_VERSION,
            "files": len(self.files),
            "loaded_files": sum(f.status == "loaded" for f in self.files),
            # a rejected file's rows_read is what its footer claims; none of its rows is stored
            "rows_read": sum(f.rows_read for f in self.files if f.status == "loaded"),
            "accepted": self.accepted,
            "quarantined": self._sum("quarantined"),
            "duplicates": self._sum("duplicates"),
            "rejected_files": listed("rejected"),
            "skipped_files": listed("skipped"),
            "refused_files": listed("refused"),
            "vanished_files": listed("vanished"),
            "sources": [asdict(s) for s in self.sources],
            "per_file": [asdict(f) for f in self.files],
        }

    def __str__(self) -> str:
        d = self.to_dict()
        refused = f", {len(d['refused_files'])} refused" if d["refused_files"] else ""
        vanished = f", {len(d['vanished_files'])} vanished" if d["vanished_files"] else ""
        lines = [str(s) for s in self.sources] + [
            f"{counted(d['files'], 'file')}: {d['loaded_files']} loaded, {len(d['rejected_files'])} rejected, "
            f"{len(d['skipped_files'])} already ingested{refused}{vanished}",
            f"{counted(d['rows_read'], 'row')} read: {d['accepted']} accepted, {d['quarantined']} quarantined, "
            f"{d['duplicates']} duplicates",
        ]
        for f in self.files:
            name = shown(f.path)  # a newline in a file name must not split its line
            if f.status in ("rejected", "refused", "vanished"):
                lines.append(f"  {f.status:<8} {name}: {shown(f.reason or '')}")
            elif f.status == "skipped":
                lines.append(f"  skipped  {name}: {shown(f.reason or '')}")
            if f.extra_columns:
                lines.append(f"  note     {name}: ignored columns not in the contract: {', '.join(f.extra_columns)}")
            if f.missing_columns:
                lines.append(f"  note     {name}: optional columns absent, loaded as NULL: "
                             f"{', '.join(f.missing_columns)}")
        return "\n".join(lines)
