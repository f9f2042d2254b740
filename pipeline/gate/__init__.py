"""The gate: measuring each segment against the admission thresholds (evaluate.py) and deciding (decide.py), what
an evaluation holds and says (result.py), the statistics it uses (stats.py) and the p95s (quantiles.py). May import
common, warehouse and ingest."""
