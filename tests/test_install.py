"""What an installed `pipeline` relies on: its version, its shipped defaults, PIPELINE_CONFIG."""

from __future__ import annotations

from importlib.metadata import version

from conftest import run_cli

from pipeline.common import package_data
from pipeline.common.config import DEFAULT_CONFIG


def test_version_is_the_installed_distribution_version():
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"pipeline {version('edge-telemetry-pipeline')}"


def test_defaults_are_read_as_package_data():
    assert DEFAULT_CONFIG == package_data.folder("gates") / "admission.yaml"
    for name, inside in (("sql", "gate/segment_counts.sql"), ("schemas", "telemetry_event.yaml"),
                         ("gates", "candidates/rewrite.yaml"), ("schemas", "output/gate.schema.json")):
        assert (package_data.folder(name) / inside).is_file()


def test_pipeline_config_names_the_config_of_every_command(tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text("window_days: 0\n")
    done = run_cli("gate", "--check-config", env={"PIPELINE_CONFIG": str(bad)})
    assert done.returncode == 2
    assert done.stderr.strip() == f"pipeline gate: error: {bad}: window_days must be between 1 and 3650, got 0"
    good = tmp_path / "ok.yaml"
    good.write_text("window_days: 7\n")
    done = run_cli("gate", "--check-config", env={"PIPELINE_CONFIG": str(good)})
    assert done.returncode == 0 and done.stdout.startswith(f"{good}: ok (digest ")
    # --config still wins over the environment
    done = run_cli("gate", "--check-config", "--config", str(good), env={"PIPELINE_CONFIG": str(bad)})
    assert done.returncode == 0


def test_the_wheel_builds_without_warnings_and_ships_every_data_file(tmp_path):
    """`pip install` of the project builds this wheel: no setuptools warning block (a folder absent from
    `packages` is dropped with one), and every file of sql/, gates/ and schemas/ is inside it."""
    import subprocess
    import sys
    import zipfile

    from conftest import ROOT

    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    build_log = done.stdout + done.stderr
    assert "would be ignored" not in build_log and "BuildBackendWarning" not in build_log, build_log
    [wheel] = tmp_path.glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    tree = {f"pipeline/{path.relative_to(ROOT)}" for folder in ("sql", "gates", "schemas")
            for path in (ROOT / folder).rglob("*") if path.is_file() and path.suffix in (".sql", ".yaml", ".json")}
    assert tree and tree <= shipped, sorted(tree - shipped)
