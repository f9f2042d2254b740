"""The gate: measuring each segment against the admission thresholds (evaluate.py), the statistics it
uses (stats.py) and the p95s (quantiles.py). May import common, warehouse and ingest."""
