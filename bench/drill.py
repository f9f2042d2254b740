"""Operating characteristics of `pipeline drill` (docs/drill-down.md), by simulation.

    .venv/bin/python bench/drill.py [--seeds 20] [--rows 100000]

For each seed: a healthy release (A/A for the drill: every judged segment and every gate it can split, all
six dimensions) and a chip_regression release (the failing segments' failed gates). Prints, over the seeds,
the healthy releases with any cell flagged (the family-wise false flags; the target is at most 1 in 20), and
for chip_regression the share of drills whose first cell lies in the injected cell (MediaTek SoC on
android-14, npu_ready false or merged away) and whose one-line answer names soc and os_version with the injected
values (and npu_ready = false where the segment has the devices to tell).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pipeline.cli.main import main as cli
from pipeline.common.config import load_config
from pipeline.gate.drill import drill
from pipeline.gate.evaluate import evaluate_gate
from pipeline.planning.simulate import write_parquet
from pipeline.warehouse import db

AS_OF = datetime(2026, 12, 1, tzinfo=UTC)
START = datetime(2026, 11, 17)


def injected(values: dict[str, str]) -> bool:
    """The cell names the injected SoC; its OS and NPU flag are the injected ones or left out ('*': merged away
    in a small segment, or not named)."""
    return (values.get("soc", "").startswith(("helio", "dimensity")) and values.get("os_version", "*") in
            ("android-14", "*") and values.get("npu_ready", "*") in ("false", "*"))


def exact(values: dict[str, str]) -> bool:
    return injected(values) and values.get("os_version") == "android-14" and values.get("npu_ready") == "false"


def run(scenario: str, seed: int, rows: int, folder: Path) -> list:
    landing, path = folder / f"{scenario}-{seed}", folder / f"{scenario}-{seed}.duckdb"
    write_parquet(landing, "9.0", rows, scenario, seed, start=START, days=14)
    with contextlib.redirect_stdout(io.StringIO()) as said:
        code = cli(["ingest", str(landing), "--db", str(path)])
    if code != 0:
        raise SystemExit(f"ingest of {landing} exited {code}: {said.getvalue()}")
    config = load_config()
    with db.reading(path) as con:
        result = evaluate_gate(con, "9.0", config, as_of=AS_OF)
        return drill(con, result, config, ("soc", "os_version", "mem_class_gb", "npu_ready", "model_id",
                                           "app_version"), every_segment=scenario == "healthy").drills


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    flagged_releases, cells_tested, first_ok, first_exact, named_ok, npu_named, drills = 0, 0, 0, 0, 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            healthy = run("healthy", seed, args.rows, Path(tmp))
            cells_tested += sum(len(d.cells) for d in healthy)
            flags = sum(c.flagged for d in healthy for c in d.cells)
            flagged_releases += flags > 0
            chip = run("chip_regression", seed, args.rows, Path(tmp))
            for d in chip:
                drills += 1
                first_ok += bool(d.cells) and injected(d.cells[0].values)
                first_exact += bool(d.cells) and exact(d.cells[0].values)
                named_ok += {"soc", "os_version"} <= set(d.named) <= {"soc", "os_version", "npu_ready"} \
                    and injected(d.named)
                npu_named += "npu_ready" in d.named
            print(f"seed {seed}: healthy {flags} cells flagged of {sum(len(d.cells) for d in healthy)}; "
                  f"chip_regression {len(chip)} drills, first cell injected in "
                  f"{sum(bool(d.cells) and injected(d.cells[0].values) for d in chip)}", flush=True)
    print(f"healthy releases with a false flag: {flagged_releases} of {args.seeds} "
          f"({cells_tested} cells tested)")
    print(f"chip_regression drills: {drills}; first cell in the injected cell: {first_ok} "
          f"({first_ok / max(1, drills):.0%}), with its OS and NPU flag: {first_exact}; "
          f"answer names soc and os_version (and nothing else but npu_ready = false): {named_ok} "
          f"({named_ok / max(1, drills):.0%}); names npu_ready too: {npu_named} "
          f"({npu_named / max(1, drills):.0%})")


if __name__ == "__main__":
    main()
