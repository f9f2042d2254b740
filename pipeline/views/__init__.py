"""How results are shown: the plain tables (render.py), the terminal views and the HTML report. May
import the packages below it (common, warehouse, ingest, gate, rollout)."""
