"""Alerts: building them from verdict changes, the outbox, and the sinks (stdout, JSONL, webhook). May
import the packages below it (common ... views)."""
