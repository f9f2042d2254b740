"""The files the code reads at run time (sql/, schemas/, the default gates/) ship
inside the wheel as the packages pipeline.sql, pipeline.schemas and pipeline.gates
(pyproject.toml maps the repo's top-level folders in), so an installed `pipeline`
works from any folder. pip installs packages unzipped, so each is a real folder.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def folder(name: str) -> Path:
    """'sql', 'schemas' or 'gates': the shipped folder of that name."""
    return Path(str(files(f"pipeline.{name}")))
