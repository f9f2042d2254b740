"""The Google Cloud Storage backend of object_store.py, through google-cloud-storage, Google's client, so
credentials are found as gcloud and every Google library finds them: Application Default Credentials
(GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth application-default login`, the metadata server of GCE, GKE or
Cloud Run). STORAGE_EMULATOR_HOST points it at an emulator (anonymous, as the client does); `endpoint_url` of
the config at another address.

An object's identity is its generation (a new one at every write of its bytes): the Listed and Written ETag and
the VersionId are the generation, so a conditional write is `ifGenerationMatch` and a rollback reads a noncurrent
generation of a bucket with Object Versioning on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.ingest.object_store import CHUNK, BucketUri, Conflict, Fetched, Listed, Store, Written, write_whole

_TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}
_TIMEOUT = (10, 60)  # connect, read


class GcsStore(Store):
    credentials_hint = ("no Google credentials found (GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth "
                        "application-default login`, or the metadata server)")

    def __init__(self, uri: BucketUri, endpoint_url: str = "", retry_seconds: float = 120.0, fetchers: int = 8,
                 retry_setting: str = "landing.retry_seconds", list_page: int = 1000):
        super().__init__(uri, retry_seconds, retry_setting)
        self.endpoint_url, self.fetchers, self.list_page = endpoint_url, fetchers, list_page
        self._client: Any = None

    @property
    def client(self) -> Any:
        """Made at first use, inside a retried request: finding credentials is where a missing one shows."""
        if self._client is None:
            import requests
            from google.cloud import storage

            client = storage.Client(client_options={"api_endpoint": self.endpoint_url} if self.endpoint_url else None)
            adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=max(1, self.fetchers))
            client._http.mount("http://", adapter)  # one pooled connection per fetcher, as boto3's
            client._http.mount("https://", adapter)
            self._client = client
        return self._client

    def _errors(self) -> tuple[type[BaseException], ...]:
        import requests
        from google.api_core import exceptions as gx
        from google.auth import exceptions as ax

        return gx.GoogleAPICallError, requests.RequestException, ax.GoogleAuthError

    def _transient(self, exc: BaseException) -> bool:
        import requests
        from google.api_core import exceptions as gx
        from google.auth import exceptions as ax

        if isinstance(exc, gx.GoogleAPICallError):
            return exc.code in _TRANSIENT_STATUS
        return isinstance(exc, (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                                ax.TransportError))

    def _no_credentials(self, exc: BaseException) -> bool:
        from google.auth import exceptions as ax

        return isinstance(exc, ax.DefaultCredentialsError)

    def _said(self, exc: BaseException) -> str:
        from google.api_core import exceptions as gx

        if isinstance(exc, gx.GoogleAPICallError):  # its message starts with the request: "GET http://...: "
            return f"HTTP {exc.code}: {re.sub(r'^[A-Z]+ [^ ]+: ', '', exc.message or '') or type(exc).__name__}"
        return super()._said(exc)

    def pages(self, start_after: str = "") -> Iterator[list[Listed]]:
        what, token = f"listing {self.uri}", None
        while True:
            def one_page(token: str | None = token) -> tuple[list[Any], str | None]:
                found = self.client.list_blobs(self.uri.bucket, prefix=self.uri.prefix, page_token=token,
                                               start_offset=start_after or None, max_results=None,
                                               page_size=self.list_page, retry=None, timeout=_TIMEOUT)
                page = next(found.pages, [])
                return list(page), found.next_page_token

            blobs, token = self._retrying(what, one_page)
            # GCS lists from start_offset itself; that key was listed before (and emulators may ignore it)
            yield [Listed(b.name, int(b.size), str(b.generation), b.updated) for b in blobs if b.name > start_after]
            if not token:
                return

    def _blob(self, key: str, version_id: str | None = None) -> Any:
        """The object's metadata (of one generation); None when there is none."""
        return self.client.bucket(self.uri.bucket).get_blob(key, generation=int(version_id) if version_id else None,
                                                            retry=None, timeout=_TIMEOUT)

    def fetch(self, key: str, path: Path) -> Fetched | None:
        from google.api_core import exceptions as gx

        def attempt() -> Fetched | None:
            blob = self._blob(key)
            if blob is None:
                return None
            pinned = self.client.bucket(self.uri.bucket).blob(key, generation=blob.generation)
            try:  # this generation's bytes: a write after the metadata was read cannot mix two objects
                with pinned.open("rb", chunk_size=CHUNK, retry=None, raw_download=True) as body:
                    sha256, size = write_whole(iter(lambda: body.read(CHUNK), b""), path, int(blob.size))
            except gx.NotFound:
                return None
            return Fetched(key, size, str(blob.generation), str(blob.generation), sha256, path)

        return self._retrying(self.uri.of(key), attempt)

    def put(self, key: str, body: bytes, *, if_match: str | None, cache_control: str, content_type: str,
            metadata: dict[str, str]) -> Written:
        from google.api_core import exceptions as gx

        def attempt() -> Written:
            blob = self.client.bucket(self.uri.bucket).blob(key)
            blob.cache_control, blob.metadata = cache_control, metadata
            try:
                blob.upload_from_string(body, content_type=content_type, retry=None, timeout=_TIMEOUT,
                                        if_generation_match=int(if_match) if if_match else 0)
            except gx.PreconditionFailed:
                raise Conflict(self.head(key)) from None
            return Written(str(blob.generation), str(blob.generation))

        return self._retrying(self.uri.of(key), attempt)

    def head(self, key: str, version_id: str | None = None) -> dict[str, Any] | None:
        blob = self._retrying(self.uri.of(key), lambda: self._blob(key, version_id))
        if blob is None:
            return None
        return {"ETag": str(blob.generation), "VersionId": str(blob.generation), "LastModified": blob.updated,
                "CacheControl": blob.cache_control, "ContentType": blob.content_type, "Metadata": blob.metadata or {}}

    def read(self, key: str, version_id: str | None = None) -> bytes:
        what = self.uri.of(key) + (f" version {version_id}" if version_id else "")
        blob = self.client.bucket(self.uri.bucket).blob(key, generation=int(version_id) if version_id else None)
        return self._retrying(what, lambda: blob.download_as_bytes(retry=None, timeout=_TIMEOUT))

    def versions(self, key: str) -> list[dict[str, Any]]:
        def attempt() -> list[Any]:
            return [b for b in self.client.list_blobs(self.uri.bucket, prefix=key, versions=True, retry=None,
                                                      timeout=_TIMEOUT) if b.name == key]

        found = self._retrying(f"listing the versions of {self.uri.of(key)}", attempt)
        live = [b.generation for b in found if b.time_deleted is None]
        return sorted(({"VersionId": str(b.generation), "ETag": str(b.generation), "LastModified": b.updated,
                        "IsLatest": bool(live) and b.generation == max(live)} for b in found),
                      key=lambda v: int(v["VersionId"]), reverse=True)

    def versioned(self) -> bool:
        bucket = self._retrying(f"reading the versioning of {self.uri.source}",
                                lambda: self.client.get_bucket(self.uri.bucket, retry=None, timeout=_TIMEOUT))
        return bool(bucket.versioning_enabled)
