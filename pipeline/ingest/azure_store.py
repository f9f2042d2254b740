"""The Azure Blob Storage backend of object_store.py, through azure-storage-blob, Microsoft's client:
`az://container/prefix` in the account that AZURE_STORAGE_CONNECTION_STRING names (as the az CLI and Azurite use
it), else in AZURE_STORAGE_ACCOUNT (or at `endpoint_url` of the config) with DefaultAzureCredential (the
environment's service principal, a managed identity, `az login`). Nothing secret is read from the config.

Listing is incremental without a StartAfter (Blob's listing has none): the folders below the prefix are listed
one level at a time (a day's folder is one entry), and only those at or after the start are listed whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.common.errors import BucketError
from pipeline.ingest.object_store import BucketUri, Conflict, Fetched, Listed, Store, Written, write_whole

CONNECTION_ENV, ACCOUNT_ENV = "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT"
_TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}


def _quoted(etag: str) -> str:
    """An ETag as HTTP quotes it: Blob's listing gives it bare, its other answers quoted."""
    return etag if etag.startswith('"') else f'"{etag}"'


class AzureStore(Store):
    credentials_hint = ("no Azure credentials found (AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT "
                        "with a service principal's AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, a managed "
                        "identity or `az login`)")

    def __init__(self, uri: BucketUri, endpoint_url: str = "", retry_seconds: float = 120.0, fetchers: int = 8,
                 retry_setting: str = "landing.retry_seconds", list_page: int = 1000):
        super().__init__(uri, retry_seconds, retry_setting)
        self.endpoint_url, self.fetchers, self.list_page = endpoint_url, fetchers, list_page
        self._container: Any = None

    @property
    def container(self) -> Any:
        if self._container is None:
            from azure.storage.blob import BlobServiceClient

            # retried here, within the deadline; one pooled connection per fetcher
            options = {"retry_total": 0, "connection_timeout": 10, "read_timeout": 60,
                       "connection_data_block_size": 1 << 20}
            connection = os.environ.get(CONNECTION_ENV, "")
            account = os.environ.get(ACCOUNT_ENV, "")
            if connection:
                service = BlobServiceClient.from_connection_string(connection, **options)
            elif self.endpoint_url or account:
                from azure.identity import DefaultAzureCredential

                url = self.endpoint_url or f"https://{account}.blob.core.windows.net"
                service = BlobServiceClient(url, credential=DefaultAzureCredential(), **options)
            else:
                raise BucketError(f"{self.uri}: {self.credentials_hint}")
            self._container = service.get_container_client(self.uri.bucket)
        return self._container

    def _errors(self) -> tuple[type[BaseException], ...]:
        from azure.core import exceptions as zx

        return (zx.AzureError,)

    def _transient(self, exc: BaseException) -> bool:
        from azure.core import exceptions as zx

        if isinstance(exc, zx.HttpResponseError) and exc.status_code is not None:
            return exc.status_code in _TRANSIENT_STATUS
        return isinstance(exc, (zx.ServiceRequestError, zx.ServiceResponseError, zx.IncompleteReadError))

    def _no_credentials(self, exc: BaseException) -> bool:
        from azure.core import exceptions as zx

        return isinstance(exc, zx.ClientAuthenticationError) and getattr(exc, "status_code", None) is None

    def _said(self, exc: BaseException) -> str:
        from azure.core import exceptions as zx

        if isinstance(exc, zx.HttpResponseError) and exc.status_code is not None:
            code = getattr(exc, "error_code", None) or exc.reason or ""
            code = getattr(code, "value", code)  # a StorageErrorCode
            return f"{code} (HTTP {exc.status_code})"
        return super()._said(exc)

    def pages(self, start_after: str = "") -> Iterator[list[Listed]]:
        if not start_after:
            yield from self._flat(self.uri.prefix)
            return
        yield from self._after(self.uri.prefix, start_after)

    def _after(self, folder: str, start_after: str) -> Iterator[list[Listed]]:
        """The objects under `folder` after `start_after`: its folders before the start's are not listed."""
        from azure.storage.blob import BlobPrefix

        entries = self._retrying(f"listing {self.uri.of(folder)}",
                                 lambda: list(self.container.walk_blobs(name_starts_with=folder, delimiter="/")))
        for entry in entries:
            if not isinstance(entry, BlobPrefix):  # an object right under `folder`
                if entry.name > start_after:
                    yield [Listed(entry.name, int(entry.size), _quoted(entry.etag), entry.last_modified)]
            elif start_after.startswith(entry.name):
                yield from self._after(entry.name, start_after)
            elif entry.name > start_after:
                yield from self._flat(entry.name)

    def _flat(self, prefix: str) -> Iterator[list[Listed]]:
        what, token = f"listing {self.uri.of(prefix)}", None
        while True:
            def one_page(token: str | None = token) -> tuple[list[Any], str | None]:
                pages = self.container.list_blobs(name_starts_with=prefix or None,
                                                  results_per_page=self.list_page).by_page(continuation_token=token)
                return list(next(pages, [])), pages.continuation_token

            blobs, token = self._retrying(what, one_page)
            yield [Listed(b.name, int(b.size), _quoted(b.etag), b.last_modified) for b in blobs]
            if not token:
                return

    def fetch(self, key: str, path: Path) -> Fetched | None:
        from azure.core import exceptions as zx

        def attempt() -> Fetched | None:
            try:
                download = self.container.get_blob_client(key).download_blob(max_concurrency=1)
            except zx.ResourceNotFoundError:
                return None
            sha256, size = write_whole(download.chunks(), path, int(download.size))
            props = download.properties
            return Fetched(key, size, _quoted(props.etag), props.version_id, sha256, path)

        return self._retrying(self.uri.of(key), attempt)

    def put(self, key: str, body: bytes, *, if_match: str | None, cache_control: str, content_type: str,
            metadata: dict[str, str]) -> Written:
        from azure.core import MatchConditions
        from azure.core import exceptions as zx
        from azure.storage.blob import ContentSettings

        settings = ContentSettings(content_type=content_type, cache_control=cache_control)
        metadata = {name.replace("-", "_"): value for name, value in metadata.items()}  # C# identifiers only
        condition = ({"overwrite": True, "etag": if_match, "match_condition": MatchConditions.IfNotModified}
                     if if_match else {"overwrite": False})

        def attempt() -> Written:
            try:
                answer = self.container.get_blob_client(key).upload_blob(body, content_settings=settings,
                                                                         metadata=metadata, **condition)
            except (zx.ResourceExistsError, zx.ResourceModifiedError):
                raise Conflict(self.head(key)) from None
            return Written(_quoted(answer["etag"]), answer.get("version_id"))

        return self._retrying(self.uri.of(key), attempt)

    def head(self, key: str, version_id: str | None = None) -> dict[str, Any] | None:
        from azure.core import exceptions as zx

        def attempt() -> Any:
            try:
                return self.container.get_blob_client(key).get_blob_properties(version_id=version_id)
            except zx.ResourceNotFoundError:
                return None

        props = self._retrying(self.uri.of(key), attempt)
        if props is None:
            return None
        return {"ETag": _quoted(props.etag), "VersionId": props.version_id, "LastModified": props.last_modified,
                "CacheControl": props.content_settings.cache_control,
                "ContentType": props.content_settings.content_type, "Metadata": dict(props.metadata or {})}

    def read(self, key: str, version_id: str | None = None) -> bytes:
        what = self.uri.of(key) + (f" version {version_id}" if version_id else "")
        return self._retrying(what, lambda: self.container.get_blob_client(key).download_blob(
            version_id=version_id).readall())

    def versions(self, key: str) -> list[dict[str, Any]]:
        found = self._retrying(f"listing the versions of {self.uri.of(key)}", lambda: [
            b for b in self.container.list_blobs(name_starts_with=key, include=["versions"]) if b.name == key])
        return sorted(({"VersionId": b.version_id, "ETag": _quoted(b.etag), "LastModified": b.last_modified,
                        "IsLatest": bool(b.is_current_version)} for b in found if b.version_id),
                      key=lambda v: v["LastModified"], reverse=True)

    def versioned(self) -> bool:
        """Blob versioning is an account setting the data plane does not show: on when the objects carry
        version ids."""
        head = self._retrying(f"listing {self.uri}", lambda: next(iter(self.container.list_blobs(
            name_starts_with=self.uri.prefix or None, results_per_page=1)), None))
        return head is not None and getattr(head, "version_id", None) is not None
