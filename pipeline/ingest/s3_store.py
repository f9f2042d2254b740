"""The S3 backend of object_store.py, through boto3, the AWS SDK for Python, so credentials and endpoints are
found the way every AWS tool finds them: the standard chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE
and ~/.aws, the instance or container role), and for an S3-compatible store the endpoint from AWS_ENDPOINT_URL_S3
or AWS_ENDPOINT_URL. `landing.endpoint_url` and `landing.region` of the config name them in the file instead
(never a secret)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.common.config import s3_endpoint
from pipeline.common.errors import BucketError
from pipeline.ingest.object_store import (
    CHUNK,
    BucketUri,
    Conflict,
    Fetched,
    Listed,
    Store,
    Written,
    write_whole,
)

_TRANSIENT_CODES = {"SlowDown", "RequestTimeout", "Throttling", "ThrottlingException", "InternalError",
                    "ServiceUnavailable", "RequestTimeTooSkewed"}


def _status_and_code(exc: BaseException) -> tuple[int, str]:
    response = getattr(exc, "response", None) or {}
    return (int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0),
            str(response.get("Error", {}).get("Code") or ""))


def _transient_error(exc: BaseException) -> bool:
    from botocore import exceptions as bx

    if isinstance(exc, bx.ClientError):
        status, code = _status_and_code(exc)
        return status >= 500 or status == 429 or code in _TRANSIENT_CODES
    return isinstance(exc, (bx.EndpointConnectionError, bx.ConnectionClosedError, bx.ReadTimeoutError,
                            bx.ConnectTimeoutError, bx.ResponseStreamingError, bx.IncompleteReadError,
                            bx.HTTPClientError))


def _said_of(exc: BaseException) -> str:
    """What went wrong, in one line, without anything from the request's signature or credentials."""
    status, code = _status_and_code(exc)
    if code:
        message = (getattr(exc, "response", None) or {}).get("Error", {}).get("Message") or ""
        return f"{code}{f' (HTTP {status})' if status else ''}{f': {message}' if message else ''}"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


class S3Store(Store):
    credentials_hint = "no AWS credentials found (environment, AWS_PROFILE and ~/.aws, or an instance role)"

    def __init__(self, uri: BucketUri, endpoint_url: str = "", region: str = "", retry_seconds: float = 120.0,
                 fetchers: int = 8, list_page: int = 1000, retry_setting: str = "landing.retry_seconds"):
        import boto3
        from botocore.config import Config as BotoConfig

        super().__init__(uri, retry_seconds, retry_setting)
        self.list_page = list_page
        endpoint = s3_endpoint(endpoint_url)
        config = BotoConfig(retries={"mode": "standard", "max_attempts": 1},  # retried here, within a deadline
                            connect_timeout=10, read_timeout=60, max_pool_connections=max(1, fetchers),
                            # an S3-compatible store at an address of its own rarely has per-bucket host names
                            s3={"addressing_style": "path" if endpoint else "auto"})
        self._client = boto3.session.Session().client("s3", endpoint_url=endpoint_url or None,
                                                      region_name=region or None, config=config)

    def _errors(self) -> tuple[type[BaseException], ...]:
        from botocore import exceptions as bx

        return bx.BotoCoreError, bx.ClientError

    def _transient(self, exc: BaseException) -> bool:
        return _transient_error(exc)

    def _no_credentials(self, exc: BaseException) -> bool:
        from botocore import exceptions as bx

        return isinstance(exc, bx.NoCredentialsError)

    def _said(self, exc: BaseException) -> str:
        return _said_of(exc)

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
            yield [Listed(o["Key"], int(o["Size"]), str(o.get("ETag", "")), o.get("LastModified"))
                   for o in page.get("Contents", [])]
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
            sha256, size = write_whole(answer["Body"].iter_chunks(CHUNK), path, int(answer["ContentLength"]))
            return Fetched(key, size, str(answer.get("ETag", "")), answer.get("VersionId"), sha256, path)

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


