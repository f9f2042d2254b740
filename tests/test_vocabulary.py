"""One vocabulary (issue 27): each verdict, bucket and tier word, the routes' edge_with_cloud_check and the
not_applicable status, each gate name and the weak-network cut are written once in the package, as their
definition (common/vocabulary.py, common/registry.py, common/config.py); everything else names the enum member.
"edge" and "cloud", "pass" and "fail" are enum members where they mean a route or a check's status, but the
same letters are also the side of every comparison and a rollout look's outcome, so grep cannot tell them
apart and they are not counted here. SQL computes the bucket in one view (sql/ddl/derived.sql)."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from pipeline.common.config import Network
from pipeline.common.registry import GATE_NAMES, GateName
from pipeline.common.vocabulary import Bucket, Route, Status, Tier, Verdict
from pipeline.warehouse import sqlfiles

WORDS = sorted({*map(str, Verdict), Status.NOT_APPLICABLE, Route.EDGE_WITH_CLOUD_CHECK, *map(str, Bucket),
                *map(str, Tier), *map(str, GateName)})
TIMES = {"thermal": 2, "retention": 2}  # these gates' names are also their labels
# the same letters meaning something else: a named query and its column, a network_type value, a section key
ELSEWHERE = {
    ("fallback_rate", "pipeline/views/frames.py"): "the named query sql/queries/fallback_rate.sql and its column",
    ("fallback_rate", "pipeline/views/report.py"): "the daily_rates query's column",
    ("offline", "pipeline/common/config.py"): "a network_type value of the contract",
    ("offline", "pipeline/planning/simulate.py"): "a network_type value of the contract",
    ("thermal", "pipeline/planning/admit.py"): "the admission report's thermal section",
}


def _literals(word: str) -> dict[str, int]:
    found: dict[str, int] = {}
    pattern = re.compile(r"""(?<![\w.])["']""" + re.escape(word) + r"""["']""")
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        n = sum(len(pattern.findall(line)) for line in path.read_text().splitlines()
                if not line.lstrip().startswith("#"))
        if n and (word, rel) not in ELSEWHERE:
            found[rel] = n
    return found


@pytest.mark.parametrize("word", WORDS)
def test_each_word_is_written_once_as_its_definition(word):
    found = _literals(word)
    home = "pipeline/common/registry.py" if word in GATE_NAMES else "pipeline/common/vocabulary.py"
    assert found == {home: TIMES.get(word, 1)}, f"{word!r} written outside its definition ({home}): {found}"


def test_the_weak_network_cut_is_set_once():
    assert Network().weak_rtt_ms == 300.0
    hits = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "pipeline").rglob("*.py"))
            for line in p.read_text().splitlines()
            if re.search(r"(?<![\w.])300(\.0)?(?![\w.])", line) and re.search(r"weak|rtt", line, re.I)]
    assert hits == ["pipeline/common/config.py"], hits


def test_sql_computes_the_bucket_in_one_view_and_names_it_by_parameter_elsewhere():
    """sql/ddl/derived.sql computes network_bucket (a view takes no parameters); every other file names a
    bucket as $bucket_offline / $bucket_weak, bound from the vocabulary by sqlfiles.run."""
    sql = {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted((ROOT / "sql").rglob("*.sql"))}
    naming = [name for name, text in sql.items() for b in Bucket if f"'{b}'" in text]
    assert sorted(set(naming)) == ["sql/ddl/derived.sql"], naming
    assert all(">= 300" not in text and "> 300" not in text for text in sql.values())
    assert sqlfiles.WORDS == {"bucket_offline": "offline", "bucket_weak": "weak"}
    assert sqlfiles.with_words(sqlfiles.sql_file("gate/weak_latency"), {"release": "4.12"}) == {
        "bucket_weak": "weak", "release": "4.12"}


def test_json_carries_the_plain_strings():
    import json

    shown = json.dumps({Verdict.KEEP_EDGE: [Status.PASS, GateName.QUALITY_LOSS]})
    assert shown == '{"keep_edge": ["pass", "quality_loss"]}'


def test_edge_cloud_pass_and_fail_are_compared_and_looked_up_by_their_members():
    """Where "edge", "cloud", "pass", "fail" (and a look's "insufficient", a cell's "inherit") are compared with,
    looked up or set as a value, the code names the member (Route, Side, Status, Outcome, CellStatus): only their
    definitions spell them. Output keys and labels with the same letters are other words and are not counted."""
    words = r"(edge|cloud|pass|fail|insufficient|inherit)"
    uses = re.compile(rf"""(==|!=|\bin)\s*["']{words}["']|\.get\(\(?["']{words}["']|equal\([^)]*["']{words}["']\)"""
                      rf"""|RouteChoice\(["']{words}["']|<\s*0\.5,\s*["']{words}["']\)|=\s*["']{words}["'](,|$)""")
    found = [f"{p.relative_to(ROOT).as_posix()}:{i}" for p in sorted((ROOT / "pipeline").rglob("*.py"))
             if p.name != "vocabulary.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if uses.search(line)]
    assert found == []
