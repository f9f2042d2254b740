"""Telemetry ingestion and rollback gate for on-device language models."""

__version__ = "0.1.0"
