"""`python -m pipeline`, and the file spark-submit runs: `spark-submit .../pipeline/__main__.py gate --engine spark ...`
(run as a file, its folder comes first on sys.path, where the package's own modules would shadow others)."""

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

from pipeline.cli.main import run  # noqa: E402

if __name__ == "__main__":
    run()
