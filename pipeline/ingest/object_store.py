"""Object storage as a landing: listing and fetching the objects under `s3://bucket/prefix`.

Through boto3, the AWS SDK for Python, so credentials and endpoints are found the way every AWS tool finds
them: the standard chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, the instance or
container role), and for an S3-compatible store the endpoint from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL.
`landing.endpoint_url` and `landing.region` of the config name them in the file instead (never a secret).

Every request is retried on what is temporary (a 5xx such as 503 SlowDown, 429, a timeout, a dropped
connection, a body cut short) with capped exponential backoff until `landing.retry_seconds` have passed
since its first try; a listing page is asked for again with the same continuation token, an object is
fetched again from its first byte. What is permanent (no such bucket, access denied, no credentials) fails
at once, naming the bucket and key. An object deleted between its listing and its read is reported.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pipeline.common.config import s3_endpoint
from pipeline.common.errors import BucketError, UsageError

SCHEMES = ("s3://",)
# gs:// and az:// are not read yet: named so the error says so instead of "no such file"
_OTHER_SCHEMES = ("gs://", "gcs://", "az://", "abfs://", "abfss://", "wasb://", "wasbs://", "http://", "https://")
_BACKOFF_FIRST_S, _BACKOFF_MAX_S = 0.2, 5.0
_CHUNK = 1 << 20  # bytes of an object's body held at a time
_TRANSIENT_CODES = {"SlowDown", "RequestTimeout", "Throttling", "ThrottlingException", "InternalError",
                    "ServiceUnavailable", "RequestTimeTooSkewed"}
T = TypeVar("T")


def is_uri(text: str | Path) -> bool:
    return isinstance(text, str) and "://" in text


@dataclass(frozen=True)
class BucketUri:
    bucket: str
    prefix: str  # "" for the whole bucket

    @property
    def source(self) -> str:
        return f"s3://{self.bucket}"

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def of(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


def parse_uri(text: str) -> BucketUri:
    """`s3://bucket/prefix` (the prefix may be empty); UsageError naming what is wrong."""
    if text.startswith(_OTHER_SCHEMES):
        scheme = text.split("://", 1)[0]
        raise UsageError(f"{text}: {scheme}:// landings are not read yet; s3:// (AWS S3 or an S3-compatible "
                         "store) is, and a local folder")
    if not text.startswith(SCHEMES):
        raise UsageError(f"{text}: not a landing this pipeline reads; give a local folder or s3://bucket/prefix")
    bucket, _, prefix = text[len("s3://"):].partition("/")
    if not bucket:
        raise UsageError(f"{text}: no bucket named; e.g. s3://telemetry-landing/uploads/")
    return BucketUri(bucket, prefix)


@dataclass(frozen=True)
class Listed:
    """An object as the listing shows it: its identity is (key, size, etag)."""

    key: str
    size: int
    etag: str


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


def _status_and_code(exc: Exception) -> tuple[int, str]:
    response = getattr(exc, "response", None) or {}
    return (int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0),
            str(response.get("Error", {}).get("Code") or ""))


def _transient(exc: Exception) -> bool:
    from botocore import exceptions as bx

    if isinstance(exc, bx.ClientError):
        status, code = _status_and_code(exc)
        return status >= 500 or status == 429 or code in _TRANSIENT_CODES
    return isinstance(exc, (bx.EndpointConnectionError, bx.ConnectionClosedError, bx.ReadTimeoutError,
                            bx.ConnectTimeoutError, bx.ResponseStreamingError, bx.IncompleteReadError,
                            bx.HTTPClientError, _ShortBody))


def _said(exc: Exception) -> str:
    """What went wrong, in one line, without anything from the request's signature or credentials."""
    status, code = _status_and_code(exc)
    if code:
        message = (getattr(exc, "response", None) or {}).get("Error", {}).get("Message") or ""
        return f"{code}{f' (HTTP {status})' if status else ''}{f': {message}' if message else ''}"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


class _ShortBody(Exception):
    """Fewer bytes arrived than the object's length: fetched again."""


class S3Store:
    """One bucket's objects. `retry_seconds`: how long a request is retried on what is temporary;
    `fetchers`: connections kept for concurrent fetches."""

    def __init__(self, uri: BucketUri, endpoint_url: str = "", region: str = "", retry_seconds: float = 120.0,
                 fetchers: int = 8, list_page: int = 1000, retry_setting: str = "landing.retry_seconds"):
        import boto3
        from botocore.config import Config as BotoConfig

        self.uri, self.retry_seconds, self.list_page = uri, retry_seconds, list_page
        self.retry_setting = retry_setting
        endpoint = s3_endpoint(endpoint_url)
        config = BotoConfig(retries={"mode": "standard", "max_attempts": 1},  # retried here, within a deadline
                            connect_timeout=10, read_timeout=60, max_pool_connections=max(1, fetchers),
                            # an S3-compatible store at an address of its own rarely has per-bucket host names
                            s3={"addressing_style": "path" if endpoint else "auto"})
        self._client = boto3.session.Session().client("s3", endpoint_url=endpoint_url or None,
                                                      region_name=region or None, config=config)

    def _retrying(self, what: str, attempt: Callable[[], T]) -> T:
        """`attempt()`, retried on what is temporary; BucketError naming `what` on anything else."""
        from botocore import exceptions as bx

        deadline = time.monotonic() + self.retry_seconds
        wait, tries = _BACKOFF_FIRST_S, 0
        while True:
            tries += 1
            try:
                return attempt()
            except (bx.BotoCoreError, bx.ClientError, _ShortBody) as exc:
                if isinstance(exc, bx.NoCredentialsError):
                    raise BucketError(f"{what}: no AWS credentials found (environment, AWS_PROFILE and ~/.aws, "
                                      "or an instance role)") from None
                if not _transient(exc):
                    raise BucketError(f"{what}: {_said(exc)}") from None
                if time.monotonic() + wait > deadline:
                    raise BucketError(f"{what}: still failing after {tries} tries in {self.retry_seconds:g} s "
                                      f"({self.retry_setting}): {_said(exc)}") from None
                time.sleep(wait)
                wait = min(wait * 2, _BACKOFF_MAX_S)

    def pages(self, start_after: str = "") -> Iterator[list[Listed]]:
        """The objects under the prefix in key order, a page at a time, from the first key after `start_after`."""
        what = f"listing {self.uri}"
        token = None
        while True:
            ask: dict[str, Any] = {"Bucket": self.uri.bucket, "Prefix": self.uri.prefix, "MaxKeys": self.list_page}
            if token:
                ask["ContinuationToken"] = token
            elif start_after:
                ask["StartAfter"] = start_after
            page = self._retrying(what, lambda ask=ask: self._client.list_objects_v2(**ask))
            yield [Listed(o["Key"], int(o["Size"]), str(o.get("ETag", ""))) for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")
            if not token:
                raise BucketError(f"{what}: the store said the listing goes on but gave no continuation token")

    def fetch(self, key: str, path: Path) -> Fetched | None:
        """The object's bytes written whole to `path` (from the first byte again after a failure), hashed on the
        way; None when the object no longer exists."""
        from botocore import exceptions as bx

        def attempt() -> Fetched | None:
            try:
                answer = self._client.get_object(Bucket=self.uri.bucket, Key=key)
            except bx.ClientError as exc:
                if _status_and_code(exc)[1] in ("NoSuchKey", "404"):
                    return None
                raise
            digest, size = hashlib.sha256(), 0
            with path.open("wb") as out:
                for chunk in answer["Body"].iter_chunks(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            if size != int(answer["ContentLength"]):
                raise _ShortBody(f"{size} of {answer['ContentLength']} bytes arrived")
            return Fetched(key, size, str(answer.get("ETag", "")), answer.get("VersionId"), digest.hexdigest(), path)

        return self._retrying(self.uri.of(key), attempt)

    def put(self, key: str, body: bytes, *, if_match: str | None, cache_control: str, content_type: str,
            metadata: dict[str, str]) -> Written:
        """Write `body` under `key` only if the object is still the one whose ETag is `if_match` (None: only if there
        is no object yet), so two writers never overwrite each other unseen; Conflict names what is there now."""
        from botocore import exceptions as bx

        condition = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"}

        def attempt() -> Written:
            try:
                answer = self._client.put_object(Bucket=self.uri.bucket, Key=key, Body=body, CacheControl=cache_control,
                                                 ContentType=content_type, Metadata=metadata, **condition)
            except bx.ClientError as exc:
                if _status_and_code(exc)[0] in (409, 412):  # 409: a concurrent conditional write won the race
                    raise Conflict(self.head(key)) from None
                raise
            return Written(str(answer.get("ETag", "")), answer.get("VersionId"))

        return self._retrying(self.uri.of(key), attempt)

    def head(self, key: str, version_id: str | None = None) -> dict[str, Any] | None:
        """The object's ETag, VersionId, LastModified, CacheControl and metadata; None when there is none."""
        from botocore import exceptions as bx

        def attempt() -> dict[str, Any] | None:
            try:
                return self._client.head_object(Bucket=self.uri.bucket, Key=key,
                                                **({"VersionId": version_id} if version_id else {}))
            except bx.ClientError as exc:
                if _status_and_code(exc)[0] == 404 or _status_and_code(exc)[1] in ("NoSuchKey", "404"):
                    return None
                raise

        return self._retrying(self.uri.of(key), attempt)

    def read(self, key: str, version_id: str | None = None) -> bytes:
        """The bytes of the object (of one version of it); BucketError when there is none."""
        ask = {"Bucket": self.uri.bucket, "Key": key, **({"VersionId": version_id} if version_id else {})}
        what = self.uri.of(key) + (f" version {version_id}" if version_id else "")
        return self._retrying(what, lambda: self._client.get_object(**ask)["Body"].read())

    def versions(self, key: str) -> list[dict[str, Any]]:
        """Every kept version of `key`, newest first (VersionId, ETag, LastModified, IsLatest)."""
        what = f"listing the versions of {self.uri.of(key)}"
        found: list[dict[str, Any]] = []
        ask: dict[str, Any] = {"Bucket": self.uri.bucket, "Prefix": key}
        while True:
            page = self._retrying(what, lambda ask=dict(ask): self._client.list_object_versions(**ask))
            found += [v for v in page.get("Versions", []) if v["Key"] == key]
            if not page.get("IsTruncated"):
                return sorted(found, key=lambda v: v["LastModified"], reverse=True)
            ask.update(KeyMarker=page["NextKeyMarker"], VersionIdMarker=page["NextVersionIdMarker"])

    def versioned(self) -> bool:
        what = f"reading the versioning of s3://{self.uri.bucket}"
        answer = self._retrying(what, lambda: self._client.get_bucket_versioning(Bucket=self.uri.bucket))
        return answer.get("Status") == "Enabled"


@dataclass(frozen=True)
class Written:
    etag: str
    version_id: str | None


class Conflict(Exception):
    """A conditional write refused (HTTP 412/409): someone else's object is there. `now`: its head, or None."""

    def __init__(self, now: dict[str, Any] | None):
        super().__init__("conflict")
        self.now = now
