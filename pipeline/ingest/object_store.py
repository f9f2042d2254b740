"""Object storage as a landing and a place to publish: the objects under `s3://bucket/prefix`,
`gs://bucket/prefix` or `az://container/prefix`, one backend module per store behind one interface.

stores.open_store picks the backend of a URI:
- s3_store.py: boto3, the AWS SDK (the AWS credential chain; AWS_ENDPOINT_URL_S3 for S3-compatible stores)
- gcs_store.py: google-cloud-storage (Application Default Credentials; STORAGE_EMULATOR_HOST for an emulator)
- azure_store.py: azure-storage-blob (AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with
  DefaultAzureCredential)

Every request is retried on what is temporary (a 5xx, 429, a timeout, a dropped connection, a body cut short)
with capped exponential backoff until `retry_seconds` have passed since its first try (the SDKs' own retries are
off, so every store has the same budget); a listing page is asked for again, an object is fetched again from its
first byte. What is permanent (no such bucket, access denied, no credentials) fails at once, naming the bucket
and key. An object deleted between its listing and its read is reported (fetch returns None).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pipeline.common.errors import BucketError, UsageError

STORES = {"s3": "AWS S3 or an S3-compatible store", "gs": "Google Cloud Storage", "az": "Azure Blob Storage"}
SCHEMES = tuple(f"{s}://" for s in STORES)
_ALIASES = {"gcs": "gs", "abfs": "az", "abfss": "az"}  # read as the scheme they name
# named so the error says so instead of "no such file"
_OTHER_SCHEMES = ("wasb://", "wasbs://", "http://", "https://")
_BACKOFF_FIRST_S, _BACKOFF_MAX_S = 0.2, 5.0
CHUNK = 1 << 20  # bytes of an object's body held at a time
T = TypeVar("T")


def is_uri(text: str | Path) -> bool:
    return isinstance(text, str) and "://" in text


@dataclass(frozen=True)
class BucketUri:
    bucket: str  # a bucket, or an Azure container
    prefix: str  # "" for the whole bucket
    scheme: str = "s3"

    @property
    def source(self) -> str:
        return f"{self.scheme}://{self.bucket}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix}"

    def of(self, key: str) -> str:
        return f"{self.scheme}://{self.bucket}/{key}"


def parse_uri(text: str) -> BucketUri:
    """`s3://bucket/prefix`, `gs://bucket/prefix` or `az://container/prefix` (the prefix may be empty; gcs://,
    abfs:// and abfss:// are read as gs:// and az://); UsageError naming what is wrong."""
    scheme, _, rest = text.partition("://")
    scheme = _ALIASES.get(scheme, scheme)
    if text.startswith(_OTHER_SCHEMES):
        raise UsageError(f"{text}: {text.split('://')[0]}:// is not read; give a local folder, s3://, gs:// or "
                         "az://bucket/prefix")
    if not rest or scheme not in STORES:
        raise UsageError(f"{text}: not a landing this pipeline reads; give a local folder, s3://, gs:// or "
                         "az://bucket/prefix")
    if scheme == "az" and "@" in rest.split("/")[0]:  # abfs://container@account.dfs.core.windows.net/prefix
        container, _, rest = rest.partition("@")
        rest = container + "/" + rest.partition("/")[2]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise UsageError(f"{text}: no bucket named; e.g. {scheme}://telemetry-landing/uploads/")
    return BucketUri(bucket, prefix, scheme)


@dataclass(frozen=True)
class Listed:
    """An object as the listing shows it: its identity is (key, size, etag); for GCS the etag is the object's
    generation, which changes whenever its bytes do."""

    key: str
    size: int
    etag: str
    modified: datetime | None = None  # when its bytes were written: when it landed


@dataclass(frozen=True)
class Fetched:
    """An object as it was read: the identity of the bytes fetched (an object replaced since its listing is
    read as it is now), their sha256, and where they were written."""

    key: str
    size: int
    etag: str
    version_id: str | None
    sha256: str
    path: Path


@dataclass(frozen=True)
class Written:
    etag: str
    version_id: str | None


class Conflict(Exception):
    """A conditional write refused (HTTP 412/409): someone else's object is there. `now`: its head, or None."""

    def __init__(self, now: dict[str, Any] | None):
        super().__init__("conflict")
        self.now = now


class ShortBody(Exception):
    """Fewer bytes arrived than the object's length: fetched again."""


class Store:
    """One bucket's (container's) objects. A backend says which of its errors are temporary (`_transient`), how
    to word one (`_said`) and which mean no credentials (`_no_credentials`, with where they are looked for)."""

    credentials_hint = "no credentials found"  # and where they are looked for

    def __init__(self, uri: BucketUri, retry_seconds: float, retry_setting: str):
        self.uri, self.retry_seconds, self.retry_setting = uri, retry_seconds, retry_setting

    def _errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def _transient(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def _no_credentials(self, exc: BaseException) -> bool:
        return False

    def _said(self, exc: BaseException) -> str:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text

    def _retrying(self, what: str, attempt: Callable[[], T]) -> T:
        """`attempt()`, retried on what is temporary; BucketError naming `what` on anything else."""
        deadline = time.monotonic() + self.retry_seconds
        wait, tries = _BACKOFF_FIRST_S, 0
        while True:
            tries += 1
            try:
                return attempt()
            except (*self._errors(), ShortBody) as exc:
                if self._no_credentials(exc):
                    raise BucketError(f"{what}: {self.credentials_hint}") from None
                if not isinstance(exc, ShortBody) and not self._transient(exc):
                    raise BucketError(f"{what}: {self._said(exc)}") from None
                if time.monotonic() + wait > deadline:
                    raise BucketError(f"{what}: still failing after {tries} tries in {self.retry_seconds:g} s "
                                      f"({self.retry_setting}): {self._said(exc)}") from None
                time.sleep(wait)
                wait = min(wait * 2, _BACKOFF_MAX_S)

    def pages(self, start_after: str = "") -> Iterator[list[Listed]]:
        """The objects under the prefix in key order, a page at a time, from the first key after `start_after`."""
        raise NotImplementedError

    def fetch(self, key: str, path: Path) -> Fetched | None:
        """The object's bytes written whole to `path` (from the first byte again after a failure), hashed on the
        way; None when the object no longer exists."""
        raise NotImplementedError

    def put(self, key: str, body: bytes, *, if_match: str | None, cache_control: str, content_type: str,
            metadata: dict[str, str]) -> Written:
        """Write `body` under `key` only if the object is still the one whose ETag is `if_match` (None: only if
        there is no object yet), so two writers never overwrite each other unseen; Conflict names what is there."""
        raise NotImplementedError

    def head(self, key: str, version_id: str | None = None) -> dict[str, Any] | None:
        """ETag, VersionId, LastModified, CacheControl and Metadata of the object (S3's names); None if absent."""
        raise NotImplementedError

    def read(self, key: str, version_id: str | None = None) -> bytes:
        raise NotImplementedError

    def versions(self, key: str) -> list[dict[str, Any]]:
        """Every kept version of `key`, newest first (VersionId, ETag, LastModified, IsLatest)."""
        raise NotImplementedError

    def versioned(self) -> bool:
        raise NotImplementedError


def write_whole(chunks: Iterable[bytes], path: Path, expected: int) -> tuple[str, int]:
    """`chunks` written to `path`, hashed on the way: (sha256, size); ShortBody when fewer than `expected` bytes
    came."""
    digest, size = hashlib.sha256(), 0
    with path.open("wb") as out:
        for chunk in chunks:
            out.write(chunk)
            digest.update(chunk)
            size += len(chunk)
    if size != expected:
        raise ShortBody(f"{size} of {expected} bytes arrived")
    return digest.hexdigest(), size
