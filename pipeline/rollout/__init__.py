"""What a verdict changes: the rollout state per segment (state.py), the routing files, the history of
evaluations and the pending file of evaluations that waited for the writer lock. May import the packages
below it (common, warehouse, ingest, gate)."""
