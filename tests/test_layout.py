"""The package layout is the data flow (pipeline/__init__.py): a module imports only from its own package and
the packages below it. This test fails on any import that runs back up the flow, lazy ones included."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

# low to high: each package may import the ones before it
# planning (what-if: admit, ledger, estimates, backtest, simulate) reads the gate and the rollout and is shown by
# the views, so it sits between them
LAYERS = ("common", "warehouse", "ingest", "gate", "rollout", "planning", "views", "delivery", "jobs", "cli")
# Imports that still run up the flow, each to be moved to where it belongs; the test fails when one is gone, so
# the list only shrinks.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """The pipeline modules `path` imports, as dotted paths below `pipeline.`, at any depth of the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pipeline."):
            module = node.module.removeprefix("pipeline.")
            for alias in node.names:  # `from pipeline.gate import evaluate` names the module pipeline.gate.evaluate
                sub = root / "pipeline" / Path(*module.split("."), alias.name + ".py")
                found.add(f"{module}.{alias.name}" if sub.exists() else module)
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("pipeline.") for a in node.names if a.name.startswith("pipeline.")}
    return found


def upward_imports() -> set[tuple[str, str]]:
    out = set()
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        parts = path.relative_to(ROOT / "pipeline").with_suffix("").parts
        if len(parts) < 2:  # pipeline/__init__.py, __main__.py: the package's front door
            continue
        module = ".".join(p for p in parts if p != "__init__")
        for dep in imports_of(path):
            if LAYERS.index(dep.split(".")[0]) > LAYERS.index(parts[0]):
                out.add((module, ".".join(dep.split(".")[:2])))
    return out


def import_cycles(root: Path = ROOT) -> list[list[str]]:
    """Cycles among the modules of one package (lazy imports included), each as the modules around it."""
    graph: dict[str, set[str]] = {}
    for path in sorted((root / "pipeline").rglob("*.py")):
        parts = path.relative_to(root / "pipeline").with_suffix("").parts
        if len(parts) < 2 or parts[-1] == "__init__":
            continue
        module = ".".join(parts)
        package = ".".join(parts[:-1])
        graph[module] = {d for d in imports_of(path, root) if d.rpartition(".")[0] == package and d != module}
    cycles, done = [], set()

    def visit(node: str, trail: list[str]) -> None:
        if node in trail:
            cycles.append(trail[trail.index(node):] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*trail, node])
        done.add(node)

    for module in sorted(graph):
        visit(module, [])
    return cycles


def test_every_module_lives_in_a_package_of_the_flow():
    top = sorted(p.name for p in (ROOT / "pipeline").iterdir() if p.name != "__pycache__")
    assert top == sorted(["__init__.py", "__main__.py", *LAYERS])
    for package in LAYERS:
        assert (ROOT / "pipeline" / package / "__init__.py").read_text().startswith('"""'), package


def test_imports_run_down_the_flow_only():
    found = upward_imports()
    assert found - KNOWN_UPWARD == set(), "imports that run up the flow (pipeline/__init__.py): move the code"
    assert KNOWN_UPWARD - found == set(), "these are gone: remove them from KNOWN_UPWARD"


def test_no_package_has_an_import_cycle_inside_it():
    """Within a package too, imports run one way (gate: evaluate -> cells -> drill -> figures; a function-local
    import that closes a loop counts)."""
    assert import_cycles() == []


def test_exit_codes_are_defined_once_and_the_readme_lists_them_word_for_word():
    """pipeline/common/exit_codes.py is the one table: no other module binds an EXIT_ name or an exit_code to a
    number, and the README's "Exit codes" list is that table's."""
    import re

    from pipeline.common.exit_codes import MEANING

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    listed = [line for line in section.splitlines() if line.startswith("- ")]
    assert listed == [f"- {code.value}: {text}" for code, text in MEANING.items()]
    defining = re.compile(r"^\s*(EXIT_[A-Z_]+(\s*,\s*EXIT_[A-Z_]+)*|exit_code)\s*(:\s*\w+)?\s*=\s*[\d(]", re.M)
    found = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "pipeline").rglob("*.py"))
             if p.name != "exit_codes.py" and defining.search(p.read_text())]
    assert found == []


LONG_MODULE = 600  # lines: a module longer says at its top why it is one module


def test_a_long_module_says_why_it_is_one_module():
    long = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
            for p in (ROOT / "pipeline").rglob("*.py") if len(p.read_text().splitlines()) > LONG_MODULE}
    unexplained = [p for p in long if "Why one module:" not in (ast.get_docstring(ast.parse((ROOT / p).read_text()))
                                                                or "")]
    assert unexplained == [], f"over {LONG_MODULE} lines without 'Why one module:' in the docstring: {unexplained}"


def test_every_module_is_on_the_map_and_every_command_in_commands_md():
    """docs/layout.md names every module of every package (by its name, in its package's lines), and
    docs/commands.md every command the parser has."""
    import re

    from pipeline.cli.main import build_parser

    layout = (ROOT / "docs" / "layout.md").read_text()
    block = layout.split("```", 2)[1]
    missing = []
    for package in LAYERS:
        lines = block.split(f"  {package}/", 1)[1]
        lines = re.split(r"\n  [a-z]+/ ", lines, maxsplit=1)[0]
        for path in sorted((ROOT / "pipeline" / package).rglob("*.py")):
            name = path.stem
            if name != "__init__" and not re.search(rf"(?<![\w-]){name}(?![\w-])", lines):
                missing.append(f"{package}/{path.relative_to(ROOT / 'pipeline' / package)}")
    assert missing == []
    commands = (ROOT / "docs" / "commands.md").read_text()
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert [c for c in sub.choices if f"`pipeline {c}" not in commands] == []


# Tokens that look like file names but are not files of this repository: code (con.sql, spark.sql), package
# names, placeholders and a bucket's manifest.json.
NOT_FILES = {"con.sql", "spark.sql", "pipeline.sql", "TASK.yaml", "manifest.json", "_day.sql"}
# the team's shared folder beside the repository (the contract): not in a clone, so not checked
OUTSIDE = ("../shared/", "shared/")


def test_no_doc_or_docstring_names_a_file_that_does_not_exist():
    """Every file named in README.md, docs/ and the package's docstrings and comments exists: a path from the
    repository's root, the doc's folder, pipeline/ or sql/; a bare name somewhere in the repository."""
    import re

    names = {p.name for p in ROOT.rglob("*") if not {".venv", ".git"} & set(p.parts)}
    path = re.compile(r"(?<![\w./<-])((?:[\w.-]+/)*[\w-]+\.(?:py|sql|md|yaml|json|toml))\b")
    texts = [(p, p.read_text()) for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]]
    for p in sorted((ROOT / "pipeline").rglob("*.py")):
        source = p.read_text()
        tree = ast.parse(source)
        docs = [ast.get_docstring(n) or "" for n in ast.walk(tree)
                if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)]
        texts.append((p, "\n".join(docs + [line.split("#", 1)[1] for line in source.splitlines() if "#" in line])))
    missing = set()
    for p, text in texts:
        for m in path.finditer(text):
            ref = m.group(1)
            if ref in NOT_FILES or ref.startswith(("...", *OUTSIDE)):
                continue
            where = [ROOT / ref, p.parent / ref, ROOT / "pipeline" / ref, ROOT / "sql" / ref]
            if not (any(c.exists() for c in where) if "/" in ref else ref in names):
                missing.add((str(p.relative_to(ROOT)), ref))
    assert sorted(missing) == []


def test_the_public_surface_is_drawn_and_documented():
    """`__all__` of what a user imports: the package (pipeline.open), the notebook API (every public method of
    what pipeline.open returns is shown in docs/querying.md) and the errors (each drawn in errors.py's tree)."""
    import pipeline
    from pipeline.common import errors
    from pipeline.views import frames

    assert sorted(pipeline.__all__) == ["__version__", "open"] and callable(pipeline.open)
    assert frames.__all__ == ["WarehouseFrames"]
    shown = (ROOT / "docs" / "querying.md").read_text()
    methods = [m for m in vars(frames.WarehouseFrames) if not m.startswith("_")]
    assert methods and [m for m in methods if f"wh.{m}(" not in shown] == []
    classes = [n for n in errors.__all__ if isinstance(getattr(errors, n), type)]
    defined = [n for n, v in vars(errors).items()
               if isinstance(v, type) and issubclass(v, Exception) and v.__module__ == errors.__name__]
    assert sorted(classes) == sorted(defined)
    assert [n for n in classes if n not in errors.__doc__] == []
