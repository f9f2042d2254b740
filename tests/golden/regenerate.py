"""tests/golden/spark/ against sql/: the Spark SQL the pinned SQLGlot dialect writes for every file the Spark
engine runs (pipeline/warehouse/spark/dialect.py SPARK_FILES). Without options it only compares, prints what
differs and exits 1 if anything does; after changing one of those sql/ files, rewrite the goldens on purpose,
read the diff, and commit it with the change:

    .venv/bin/python tests/golden/regenerate.py --update-goldens
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


def main(update: bool) -> int:
    wanted = {golden_path(r): spark_sql(r) for r in SPARK_FILES}
    changed = 0
    for path in sorted((HERE / "spark").rglob("*.sql")):
        if path not in wanted:
            changed += 1
            if update:
                path.unlink()
            print(f"{'removed' if update else 'stale'} {path.relative_to(HERE)}")
    for path, text in wanted.items():
        old = path.read_text() if path.exists() else None
        if old != text:
            changed += 1
            if update:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            verb = ("wrote" if old is None else "updated") if update else ("missing" if old is None else "differs")
            print(f"{verb} {path.relative_to(HERE)}")
    return 1 if changed and not update else 0


if __name__ == "__main__":
    sys.exit(main(update="--update-goldens" in sys.argv[1:]))
