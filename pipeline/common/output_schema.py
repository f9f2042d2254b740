"""The JSON the pipeline prints for programs (`gate --json`, `nightly --json`, `ingest --json`,
`state --json`, `ledger --json`, `backtest --json`, `drill --json`, `compare --json`, `rollout --json`, the routing
table) is versioned: each object carries
`schema_version`, and schemas/output/<name>.schema.json (JSON Schema 2020-12,
shipped in the wheel, printed by `pipeline schema NAME`) describes it. Within one
version fields are only added; anything a consumer could trip on bumps it.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.common import package_data

SCHEMA_VERSION = 1
OUTPUTS = ("gate", "nightly", "ingest", "routing", "state", "ledger", "backtest", "drill", "compare", "rollout",
           "archive")


def schema(name: str) -> dict[str, Any]:
    return json.loads((package_data.folder("schemas") / "output" / f"{name}.schema.json").read_text())
