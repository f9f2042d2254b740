"""Regenerates docs/tests.md's table of the 15 slowest default tests (`make slowest`): one run of the default suite
as `make test` runs it (a pytest-xdist worker per core, by file, `--durations=0`), each test's setup, call and
teardown added up, and what each proves (the first sentence of its docstring, else its name in words). The
times are those of a worker sharing the machine with the others, as in `make test`. The table sits between two
marker comments."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "tests.md"
BEGIN, END = "<!-- slowest: begin (make slowest) -->", "<!-- slowest: end -->"
SHOWN = 15
DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S+)")


def _what_it_proves(node_id: str) -> str:
    path, _, rest = node_id.partition("::")
    name = rest.split("[")[0]
    tree = ast.parse((ROOT / path).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            doc = ast.get_docstring(node)
            if doc:
                return " ".join(doc.split(". ")[0].split()).rstrip(".")
    return name.removeprefix("test_").replace("_", " ")


def main() -> int:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "auto", "--dist", "loadfile", "-p", "no:cacheprovider",
                          "--durations=0"], capture_output=True, text=True, cwd=ROOT)  # one -q (addopts): a tally
    wall = time.monotonic() - started
    if run.returncode != 0:
        print(run.stdout[-4000:], run.stderr[-2000:], sep="\n", file=sys.stderr)
        return run.returncode
    seconds: Counter[str] = Counter()
    for line in run.stdout.splitlines():
        match = DURATION.match(line)
        if match:
            seconds[match.group(3)] += float(match.group(1))
    total = re.search(r"(\d+) passed.* in ([\d.]+)s", run.stdout)
    rows = ["| test | seconds | what it proves |", "|---|---:|---|"]
    for node_id, took in seconds.most_common(SHOWN):
        rows.append(f"| `{node_id}` | {took:.1f} | {_what_it_proves(node_id)} |")
    summary = (f"One run of {total.group(1)} tests on {os.cpu_count()} cores took {wall:.0f} s of wall time "
               f"({sum(seconds.values()):.0f} s of test time over the workers); these {SHOWN} took "
               f"{sum(t for _, t in seconds.most_common(SHOWN)):.0f} s of it.") if total else ""
    text = PAGE.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    PAGE.write_text(f"{head}{BEGIN}\n{chr(10).join(rows)}\n\n{summary}\n{END}{tail}")
    print("\n".join(rows))
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
