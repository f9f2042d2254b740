"""Rewrite tests/golden/spark/ from sql/: the Spark SQL the pinned SQLGlot dialect writes for every file the
Spark engine runs (pipeline/warehouse/spark/dialect.py SPARK_FILES). Run it after changing one of those sql/ files, read
the diff, and commit it with the change:

    .venv/bin/python tests/golden/regenerate.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from pipeline.warehouse.spark.dialect import SPARK_FILES, spark_sql  # noqa: E402


def golden_path(relname: str) -> Path:
    """'gate/segment_counts' -> spark/gate/segment_counts.sql; 'ddl/derived#events_enriched' ->
    spark/ddl/derived.events_enriched.sql."""
    return HERE / "spark" / (relname.replace("#", ".") + ".sql")


def main() -> int:
    wanted = {golden_path(r): spark_sql(r) for r in SPARK_FILES}
    for path in sorted((HERE / "spark").rglob("*.sql")):
        if path not in wanted:
            path.unlink()
            print(f"removed {path.relative_to(HERE)}")
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.read_text() if path.exists() else None
        if old != text:
            path.write_text(text)
            print(f"{'wrote' if old is None else 'updated'} {path.relative_to(HERE)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
