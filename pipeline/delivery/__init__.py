"""Alerts: building them from verdict changes (on_change, which recording an evaluation is given), the outbox,
and the sinks (stdout, JSONL, webhook). May import the packages below it (common ... views)."""
