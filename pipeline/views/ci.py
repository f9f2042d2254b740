"""The gate's answer in the shapes CI reads: a JUnit XML report (GitLab's `artifacts:reports:junit`, Jenkins)
and a Markdown step summary (GitHub Actions' $GITHUB_STEP_SUMMARY, 1 MiB a step). Both tell the release's
story (views/story.py): one testcase per segment, failed when its own gates fail, skipped when it is not judged;
the release-wide gates are testcases of their own; each segment's route and why are in its output."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from pipeline.common.vocabulary import Status, Verdict
from pipeline.views.story import ROUTE_WORDS, failed_text, group_heading

STEP_SUMMARY_LIMIT = 1024 * 1024  # GitHub refuses a step summary over 1 MiB


def junit_xml(result: dict[str, Any], story: Any) -> str:
    """`result`: GateResult.to_dict(); `story`: its ReleaseStory. One <testsuite> for the release."""
    told = story.by_segment()
    cases = []
    for name, c in result["release_wide"].items():
        if c.get("measured") is None:
            continue
        case = ET.Element("testcase", classname=f"release {result['release']}", name=f"release-wide {name}")
        if c["status"] == Status.FAIL and c["mode"] == "enforce":
            ET.SubElement(case, "failure", message=failed_text({name: c}, [name]), type="release_wide").text = c["note"]
        cases.append(case)
    for s in result["segments"]:
        key = f"{s['task']}/{s['device_tier']}/{s['network_bucket']}"
        seg = told[key]
        case = ET.Element("testcase", classname=f"release {result['release']}.{s['task']}", name=key)
        if s["decision"] == Verdict.ROLLBACK_TO_CLOUD:
            ET.SubElement(case, "failure", message=failed_text(s["metrics"], s["failed_gates"]),
                          type=Verdict.ROLLBACK_TO_CLOUD).text = seg.evidence
        elif s["decision"] == Verdict.INSUFFICIENT_DATA:
            ET.SubElement(case, "skipped", message=seg.evidence)
        ET.SubElement(case, "system-out").text = f"route: {seg.route} ({seg.cause}): {seg.why}"
        cases.append(case)
    suite = ET.Element("testsuite", name=f"pipeline gate: release {result['release']}", tests=str(len(cases)),
                       failures=str(sum(c.find("failure") is not None for c in cases)), errors="0",
                       skipped=str(sum(c.find("skipped") is not None for c in cases)),
                       timestamp=result["evaluated_at"].removesuffix("Z"))
    props = ET.SubElement(suite, "properties")
    for k, v in (("verdict", result["verdict"]), ("note", result["note"]), ("routes", story.routes_text()),
                 ("as_of", result["as_of"])):
        ET.SubElement(props, "property", name=k, value=v)
    suite.extend(cases)
    root = ET.Element("testsuites", name="pipeline gate")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def step_summary(result: dict[str, Any], story: Any, limit: int = STEP_SUMMARY_LIMIT) -> str:
    """GitHub-flavoured Markdown: the verdict, the routes by reason, then the segments whose own gates fail;
    rows past `limit` bytes are left out and counted."""
    head = [f"### Release {result['release']}: {result['verdict'].upper()}", "", result["note"], "",
            f"**Routes:** {story.routes_text()}", "", "| route | segments |", "|---|---|"]
    head += [f"| {_cell(group_heading(route, cause, decision, len(members)))} | "
             f"{_cell(', '.join(m.segment for m in members))} |"
             for route, cause, decision, members in story.groups()]
    failing = [s for s in result["segments"] if s["decision"] == Verdict.ROLLBACK_TO_CLOUD]
    rows = ["", "| segment | route | failed gates |", "|---|---|---|"] if failing else []
    told = story.by_segment()
    for s in failing:
        key = f"{s['task']}/{s['device_tier']}/{s['network_bucket']}"
        rows.append(f"| {key} | {ROUTE_WORDS.get(told[key].route, told[key].route)} | "
                    f"{_cell(failed_text(s['metrics'], s['failed_gates']))} |")
    text = "\n".join(head)
    for i, row in enumerate(rows):
        tail = f"\n\n{len(rows) - i} more rows left out: the step summary is capped at {limit:,} bytes\n"
        if len((text + "\n" + row).encode()) + len(tail.encode()) > limit:
            return text + tail
        text += "\n" + row
    return text + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
