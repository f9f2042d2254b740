"""Which backend serves a bucket URI: one module per store (s3_store, gcs_store, azure_store) behind
object_store.Store; imported only when a landing or a publish target names its scheme."""

from __future__ import annotations

from pipeline.ingest.object_store import BucketUri, Store


def open_store(uri: BucketUri, endpoint_url: str = "", region: str = "", retry_seconds: float = 120.0,
               fetchers: int = 8, retry_setting: str = "landing.retry_seconds") -> Store:
    """The backend of `uri`'s store. `endpoint_url`: the store's address where it is not the platform's own
    (an S3-compatible store, an emulator); `region`: S3's; `fetchers`: connections kept for concurrent fetches."""
    if uri.scheme == "gs":
        from pipeline.ingest.gcs_store import GcsStore

        return GcsStore(uri, endpoint_url, retry_seconds, fetchers, retry_setting)
    if uri.scheme == "az":
        from pipeline.ingest.azure_store import AzureStore

        return AzureStore(uri, endpoint_url, retry_seconds, fetchers, retry_setting)
    from pipeline.ingest.s3_store import S3Store

    return S3Store(uri, endpoint_url, region, retry_seconds, fetchers, retry_setting=retry_setting)
