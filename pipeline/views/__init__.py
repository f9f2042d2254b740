"""How results are shown: the gate table and the state text (render.py), the terminal views, the HTML report
and the notebook API on polars (frames.py). May import the packages below it (common ... planning)."""
