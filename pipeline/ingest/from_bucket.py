"""An s3:// landing: its new objects listed, fetched to local disk and ingested exactly as landed files are.

1. Listing (object_store.py) is incremental: it starts at the date folder (`dt=2026-12-05/`,
   `2026/12/05/`, `year=2026/month=12/day=05/`) one day before that of the last Parquet key the previous
   listing saw (`landing_marks`), so objects still arriving in the newest two folders are found, and older
   folders are not listed again. Keys that do not start with a date folder are listed whole each time. `--relist` lists
   the whole prefix: objects written late into an older folder are found then. Keys with a part starting
   with `.` or `_` (`_SUCCESS`, `_temporary/`: a writer's work in progress) are not read, as Arrow and Spark
   datasets skip them.
2. An object is known by (key, size, ETag) (`landed_objects`): one read before is not fetched again. An ETag
   is not a content hash (a multipart upload's is the md5 of its parts' md5s), so the same bytes uploaded
   another way are fetched once more, and then skipped by their sha256 like a copied file.
3. New objects are fetched `landing.fetchers` at a time into a spool folder under TMPDIR, at most
   `landing.spool_mb` (or run.BATCH_FILES objects) at once, each written whole (retried from its first byte) before
   anything reads it; then the chunk goes through the ingest of local files (run.Ingestor: the isolated
   reader with its limits, Great Expectations, quarantine, deduplication), named by its s3:// URI. An object
   deleted after its listing is reported as vanished.
4. After the chunk's files are stored, its objects are recorded; after the whole listing, the mark moves.
   A run killed in between fetches those objects again next time, and their sha256 says they were stored:
   nothing is counted twice.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from pipeline.common import stopping
from pipeline.common.config import LandingSettings
from pipeline.common.errors import BucketError
from pipeline.ingest.object_store import BucketUri, Fetched, Listed, Store
from pipeline.ingest.results import FileResult, SourceListing
from pipeline.ingest.stores import open_store
from pipeline.warehouse import sqlfiles
from pipeline.warehouse.handle import Warehouse

Read = Callable[[list[Path], dict[Path, str]], list[FileResult]]  # run.Ingestor(...).run of a chunk's files
_EXAMPLES = 5  # not-Parquet keys named in the summary
# the date folder a key may start with (below the prefix): dt=2026-12-05/, 2026-12-05/, 20261205/, 2026/12/05/,
# year=2026/month=12/day=05/ (any `name=` before each part)
_DATE_FOLDER = re.compile(r"(?:[A-Za-z_]+=)?(\d{4})([-_]?)(\d{2})\2(\d{2})/"
                          r"|(?:[A-Za-z_]+=)?(\d{4})/(?:[A-Za-z_]+=)?(\d{2})/(?:[A-Za-z_]+=)?(\d{2})/")
# the listing starts this many days before the last key's date folder: uploads still finishing into the day
# before (a midnight straddled) are found
LOOKBACK_DAYS = 1
_OBJECTS = pa.schema([("key", pa.string()), ("size_bytes", pa.int64()), ("etag", pa.string()),
                      ("version_id", pa.string()), ("sha256", pa.string()), ("status", pa.string())])


def listing_start(prefix: str, mark: str | None) -> str:
    """Where the next listing starts (its StartAfter): the date folder LOOKBACK_DAYS before the one the key `mark`
    lies in, right below `prefix`; '' (the whole prefix) when there is no mark, or its key does not start with a
    date folder (a folder before the date, or one finer than a day, does not sort in time order)."""
    if not mark or not mark.startswith(prefix):
        return ""
    found = _DATE_FOLDER.match(mark, len(prefix))
    if not found:
        return ""
    parts = (1, 3, 4) if found.group(1) else (5, 6, 7)
    try:
        day = date(*(int(found.group(g)) for g in parts)) - timedelta(days=LOOKBACK_DAYS)
    except ValueError:  # not a date after all (month 13)
        return ""
    start = mark[:found.end()]
    for group, value in sorted(zip(parts, (f"{day.year:04d}", f"{day.month:02d}", f"{day.day:02d}"), strict=True),
                               key=lambda gv: -found.start(gv[0])):  # from the right: spans stay valid
        start = start[:found.start(group)] + value + start[found.end(group):]
    return start


def _hidden(key: str, prefix: str) -> bool:
    """A folder marker, or a key with a part starting with `.` or `_` below the prefix."""
    return key.endswith("/") or any(part.startswith((".", "_")) for part in key[len(prefix):].split("/") if part)


def _known(wh: Warehouse, uri: BucketUri, objects: list[Listed]) -> set[str]:
    if not objects:
        return set()
    with wh.writing(publish=False) as con:
        return {row[0] for row in sqlfiles.run(con, "ingest/known_objects", {
            "source": uri.source, "keys": [o.key for o in objects], "sizes": [o.size for o in objects],
            "etags": [o.etag for o in objects]}).fetchall()}


def _chunks(store: Store, wh: Warehouse, summary: SourceListing, spool_bytes: int,
            most: int) -> Iterator[list[Listed]]:
    """The new Parquet objects of the listing, in chunks of at most `spool_bytes` or `most` objects."""
    prefix = store.uri.prefix
    chunk: list[Listed] = []
    size = 0
    for page in store.pages(summary.start_after):
        stopping.check()  # a stop asked for while listing: nothing of this listing is stored yet
        wanted = []
        for obj in page:
            if _hidden(obj.key, prefix):
                continue
            if not obj.key.endswith(".parquet"):
                summary.not_parquet += 1
                if len(summary.not_parquet_examples) < _EXAMPLES:
                    summary.not_parquet_examples.append(store.uri.of(obj.key))
                continue
            wanted.append(obj)
        known = _known(wh, store.uri, wanted)
        summary.listed += len(wanted)
        summary.already_read += len(known)
        for obj in wanted:
            if obj.key in known:
                continue
            if chunk and (len(chunk) >= most or size + obj.size > spool_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append(obj)
            size += obj.size
        if wanted:  # keys come in order; another kind of key (a manifest.json after the date folders) says nothing
            summary.last_key = wanted[-1].key
    if chunk:
        yield chunk


def _read_chunk(store: Store, pool: ThreadPoolExecutor, chunk: list[Listed], spool: Path, wh: Warehouse,
                read: Read, now: datetime) -> list[FileResult]:
    uri = store.uri
    paths = [spool / f"{i:06d}.parquet" for i in range(len(chunk))]

    def fetch(listed: Listed, path: Path) -> Fetched | None:
        stopping.check()  # a stop asked for while fetching: the chunk is not read, the next run fetches it again
        got = store.fetch(listed.key, path)
        if got is not None and listed.modified is not None:  # the copy's mtime is when the object landed
            os.utime(path, (listed.modified.timestamp(), listed.modified.timestamp()))
        return got

    try:
        fetched: list[Fetched | None] = list(pool.map(fetch, chunk, paths))
    except OSError as exc:  # the spool's disk, not the store: botocore wraps every network error
        raise BucketError(f"{uri}: cannot keep fetched objects in {spool}: {exc.strerror or exc}; TMPDIR needs "
                          f"room for landing.spool_mb") from None
    got = [f for f in fetched if f is not None]
    names = {f.path: uri.of(f.key) for f in got}
    try:
        results = read([f.path for f in got], names)
        status = {r.path: r.status for r in results}
        rows = [{"key": f.key, "size_bytes": f.size, "etag": f.etag, "version_id": f.version_id,
                 "sha256": f.sha256, "status": status[names[f.path]]} for f in got]
        with wh.writing(publish=False) as con:
            con.register("chunk_objects", pa.Table.from_pylist(rows, schema=_OBJECTS))
            sqlfiles.run(con, "ingest/record_objects", {"source": uri.source, "read_at": now})
            con.unregister("chunk_objects")
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
    vanished = [FileResult(uri.of(o.key), "vanished", reason="deleted after it was listed; not read")
                for o, f in zip(chunk, fetched, strict=True) if f is None]
    return results + vanished


def ingest_bucket(wh: Warehouse, uri: BucketUri, read: Read, chunk_files: int, settings: LandingSettings,
                  now: datetime, relist: bool = False) -> tuple[list[FileResult], SourceListing]:
    """The landing's new objects ingested (`read`: the ingest of at most `chunk_files` local copies, named by URI)."""
    store = open_store(uri, settings.endpoint_url, settings.region, settings.retry_seconds, settings.fetchers)
    with wh.writing(publish=False) as con:
        mark = sqlfiles.run(con, "ingest/landing_mark", {"landing": str(uri)}).fetchone()
    summary = SourceListing(str(uri), "" if relist or mark is None else listing_start(uri.prefix, mark[0]))
    results: list[FileResult] = []
    with tempfile.TemporaryDirectory(prefix="pipeline-landing-") as spool, \
            ThreadPoolExecutor(settings.fetchers, thread_name_prefix="fetch") as pool:
        for chunk in _chunks(store, wh, summary, settings.spool_mb << 20, chunk_files):
            results += _read_chunk(store, pool, chunk, Path(spool), wh, read, now)
    if summary.last_key:
        with wh.writing() as con:
            sqlfiles.run(con, "ingest/set_landing_mark", {"landing": str(uri), "last_key": summary.last_key,
                                                          "listed_at": now})
    return results, summary
