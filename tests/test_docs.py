"""The README's commands work as written (sqlite-utils' test_docs.py is the model):
every `$ pipeline ...` line of a README code block runs against the demo database,
with the venv's `pipeline` on PATH as `make demo` says, and exits as the README
says (0 unless the line ends in `# exit N`). Where the README shows output under
a command, its first line must be the first line the command really prints."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def _examples() -> list[tuple[int, str, str | None]]:
    """(line number, command, first output line shown or None) for each `$ pipeline` line."""
    lines = (ROOT / "README.md").read_text().splitlines()
    found, in_block = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_block = not in_block
            continue
        if in_block and line.startswith("$ pipeline "):
            nxt = lines[i + 1] if i + 1 < len(lines) else "```"
            shown = None if nxt.startswith(("```", "$ ")) or nxt.strip() in ("", "...") else nxt
            found.append((i + 1, line[2:], shown))
    return found


EXAMPLES = _examples()


def test_the_readme_shows_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize(("line", "command", "shown"), EXAMPLES, ids=[f"README:{e[0]}" for e in EXAMPLES])
def test_readme_command_runs_as_written(demo_dir: Path, line: int, command: str, shown: str | None):
    expected = re.search(r"#\s*exit (\d+)\s*$", command)
    argv = shlex.split(command, comments=True)
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "pipeline").exists(), f"no pipeline script beside {sys.executable}"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "200"}
    env.pop("PIPELINE_DB", None)
    done = subprocess.run(argv, capture_output=True, text=True, cwd=demo_dir, env=env, timeout=300)
    want = int(expected.group(1)) if expected else 0
    assert done.returncode == want, f"README line {line}: `{command}` exited {done.returncode}: {done.stderr}"
    assert "Traceback" not in done.stderr
    if shown is not None:
        first = done.stdout.splitlines()[0].rstrip() if done.stdout else ""
        assert first == shown.rstrip(), f"README line {line} shows {shown!r}, the command prints {first!r}"
