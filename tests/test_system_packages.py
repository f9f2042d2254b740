"""tests/system-packages, the one list of programs the tests drive that pip cannot install: where it may not
install them (no apt-get, or not root), `make test` stops at once with the one command to run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import PARTIAL, ROOT

SCRIPT = ROOT / "tests" / "system-packages"
INSTALL = ("sudo sh -c 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium faketime "
           "prometheus-alertmanager prometheus'")


def _bare_path(tmp_path: Path) -> str:
    """A PATH with only what the script itself runs: none of the programs, and no apt-get."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("bash", "id"):
        (bin_dir / name).symlink_to(shutil.which(name))
    return str(bin_dir)


def test_without_the_programs_install_stops_with_the_one_command_to_run(tmp_path):
    done = subprocess.run([shutil.which("bash"), str(SCRIPT), "install"], capture_output=True, text=True,
                          env={"PATH": _bare_path(tmp_path)}, timeout=30)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == "The tests need programs this machine lacks, and only root on Debian can install them here:"
    assert [line.split(" (")[0].strip() for line in lines[1:6]] == [
        "chromium", "faketime", "prometheus-alertmanager", "amtool", "promtool"]
    assert lines[6:] == ["Install them with:", f"  {INSTALL}",
                         "or run the tests that need none of them: make test-core (it lists what it skips)"]
    assert done.stdout == ""


def test_missing_lists_each_program_with_its_package_and_its_tests(tmp_path):
    done = subprocess.run([shutil.which("bash"), str(SCRIPT), "missing", "--spark"], capture_output=True, text=True,
                          env={"PATH": _bare_path(tmp_path)}, timeout=30)
    assert done.returncode == 0
    assert done.stdout == ("java (openjdk-17-jre-headless): a local Spark session (tests/test_spark.py, "
                           "make test-spark)\n")


def test_with_every_program_present_install_does_nothing():
    missing = subprocess.run([str(SCRIPT), "missing"], capture_output=True, text=True, timeout=30).stdout
    if missing and PARTIAL:
        pytest.skip(f"make test-core: not installed: {missing.strip()}")
    done = subprocess.run([str(SCRIPT), "install"], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
