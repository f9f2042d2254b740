"""The docs' commands work as written (sqlite-utils' test_docs.py is the model):
every `$ pipeline ...` line of a code block in README.md or docs/*.md runs against the demo
database, with the venv's `pipeline` on PATH as `make demo` says, and exits as the page
says (0 unless the line ends in `# exit N`). Where a page shows output under a command,
its first line must be the first line the command really prints. The README stays the
pitch (under 250 lines), and every relative link in the pages points at a file that exists."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _examples(page: Path) -> list[tuple[str, int, str, str | None]]:
    """(page, line number, command, first output line shown or None) for each `$ pipeline` line."""
    lines = page.read_text().splitlines()
    found, in_block = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_block = not in_block
            continue
        if in_block and line.startswith("$ pipeline "):
            nxt = lines[i + 1] if i + 1 < len(lines) else "```"
            shown = None if nxt.startswith(("```", "$ ")) or nxt.strip() in ("", "...") else nxt
            found.append((_name(page), i + 1, line[2:], shown))
    return found


EXAMPLES = [example for page in PAGES for example in _examples(page)]


def test_the_readme_shows_examples():
    assert len([e for e in EXAMPLES if e[0] == "README.md"]) >= 5


def test_every_docs_page_is_found():
    assert len(PAGES) > 10, [_name(p) for p in PAGES]


@pytest.mark.parametrize(("page", "line", "command", "shown"), EXAMPLES, ids=[f"{e[0]}:{e[1]}" for e in EXAMPLES])
def test_docs_command_runs_as_written(demo_dir: Path, page: str, line: int, command: str, shown: str | None):
    """Every `$ pipeline` example of README.md and docs/ runs as written on the demo and prints the first line
    shown. Through the CLI's main() in this process, from the demo folder (the installed script itself: the
    test below)."""
    argv = shlex.split(command, comments=True)
    assert argv[0] == "pipeline"
    done = run_cli(*argv[1:], env={"COLUMNS": "200", "PIPELINE_DB": ""}, cwd=demo_dir)
    _as_written(page, line, command, shown, done)


def test_the_installed_script_runs_the_first_readme_example(demo_dir: Path):
    """The `pipeline` script pip installed beside this Python, in a process of its own, as a user types it."""
    page, line, command, shown = next(e for e in EXAMPLES if e[0] == "README.md")
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "pipeline").exists(), f"no pipeline script beside {sys.executable}"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "200"}
    env.pop("PIPELINE_DB", None)
    done = subprocess.run(shlex.split(command, comments=True), capture_output=True, text=True, cwd=demo_dir,
                          env=env, timeout=300)
    _as_written(page, line, command, shown, done)


def _as_written(page: str, line: int, command: str, shown: str | None, done: subprocess.CompletedProcess) -> None:
    expected = re.search(r"#\s*exit (\d+)\s*$", command)
    want = int(expected.group(1)) if expected else 0
    assert done.returncode == want, f"{page} line {line}: `{command}` exited {done.returncode}: {done.stderr}"
    assert "Traceback" not in done.stderr
    if shown is not None:
        first = done.stdout.splitlines()[0].rstrip() if done.stdout else ""
        assert first == shown.rstrip(), f"{page} line {line} shows {shown!r}, the command prints {first!r}"


def test_the_readme_is_the_pitch():
    lines = README.read_text().splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    first_screen = "\n".join(lines[:40])
    assert "make demo" in first_screen and "make test" in first_screen


# [text](target) and ![alt](target), not inside code; the target up to a space (a title may follow)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _relative_links(page: Path) -> list[tuple[int, str]]:
    found, in_block = [], False
    for i, line in enumerate(page.read_text().splitlines()):
        if line.startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            continue
        prose = re.sub(r"`[^`]*`", "", re.sub(r"\[`([^`]*)`\]", r"[\1]", line))  # drop inline code, keep [`x`](y)
        for target in _LINK.findall(prose):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # http(s), mailto: or an anchor in the same page
            found.append((i + 1, target))
    return found


LINKS = [(_name(page), line, target) for page in PAGES for line, target in _relative_links(page)]


def _anchors(page: Path) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found, in_block = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_block = not in_block
        elif not in_block and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_the_pages_link_to_each_other():
    assert any(page == "README.md" and target.startswith("docs/") for page, _, target in LINKS)
    assert any(page.startswith("docs/") for page, _, _ in LINKS)


def test_every_relative_link_points_at_a_file():
    broken = []
    for page, line, target in LINKS:
        path_part, _, anchor = target.partition("#")
        path = ((ROOT / page).parent / path_part).resolve()
        if not path.exists():
            broken.append(f"{page}:{line}: {target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{page}:{line}: {target} (no heading #{anchor} in {path.name})")
    assert not broken, "\n".join(broken)


# the project's own issue numbers and commit hashes: development history, not what a user does or sees
# (an upstream bug is cited by its tracker, e.g. "GX issues #10738")
_HISTORY = re.compile(r"\b[Ii]ssues? \d+|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}\b")


def test_user_docs_speak_of_the_tool_not_of_its_development():
    found = [f"{page.relative_to(ROOT)}:{n}: {m.group(0)}" for page in PAGES
             for n, line in enumerate(page.read_text().splitlines(), 1) for m in _HISTORY.finditer(line)]
    assert found == []
