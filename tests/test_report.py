"""`pipeline report`: the HTML page a release manager reads, on the postmortem and healthy scenarios.

Rows go straight into a real DuckDB file (as in test_gate.py), the daily rollup is refreshed for
real, and a few rows are put in quarantine. The page must be self-contained (no URL any script,
style or image would be fetched from), show the gate's own figures, and draw every chart in a real
browser with the network off: the Chromium test renders each page headless in a network namespace
of its own (or, where that is not allowed, with every host unresolvable and a dead proxy), takes a
screenshot, and reads back the DOM after the scripts ran.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import zlib
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import ROOT, program

from pipeline.common.config import load_config
from pipeline.common.units import percent
from pipeline.gate.evaluate import evaluate_gate
from pipeline.planning.simulate import generate
from pipeline.views.report import CHARTS, VERDICT_COLOURS, report_filename, write_index, write_report, write_reports
from pipeline.views.story import read_story
from pipeline.warehouse import db
from pipeline.warehouse.aggregate import refresh, use_settings

START = datetime(2026, 11, 20)
AS_OF = datetime(2026, 11, 27)
CONFIG = load_config()
QUARANTINED = 7  # rows of the postmortem release put in quarantine
CHROMIUM_TIMEOUT = 120


def _load(db_path: Path, table: pa.Table, quarantine: pa.Table | None = None) -> Path:
    with db.writing(db_path) as con:
        con.register("t", table)
        # file_id 1: the rollup refresh picks up rows of files newer than its high-water mark (0)
        con.execute("INSERT INTO events BY NAME SELECT *, 1 AS file_id FROM t")
        con.unregister("t")
        if quarantine is not None:
            con.register("q", quarantine)
            con.execute("INSERT INTO quarantine BY NAME SELECT *, 1 AS file_id, 'bad.parquet' AS source_file, "
                        "row_number() OVER () AS row_in_file, ['total_ms_not_negative'] AS rules, "
                        "TIMESTAMP '2026-11-27' AS quarantined_at FROM q")
            con.unregister("q")
    refresh(db_path, CONFIG)
    return db_path


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("report")
    bad = generate("4.12", QUARANTINED, "postmortem", seed=9, start=START, days=7)
    return {
        "postmortem": _load(base / "postmortem.duckdb", generate("4.12", 60_000, "postmortem", seed=1,
                                                                  start=START, days=7), bad),
        "healthy": _load(base / "healthy.duckdb", generate("4.12", 60_000, "healthy", seed=1, start=START, days=7)),
    }


@pytest.fixture(scope="module")
def reports(warehouses, tmp_path_factory) -> dict[str, tuple[Path, object]]:
    """scenario -> (report path, the GateResult it shows)."""
    out = tmp_path_factory.mktemp("pages")
    made = {}
    for name, path in warehouses.items():
        with db.reading(path) as con:
            use_settings(con, CONFIG)
            result = evaluate_gate(con, "4.12", CONFIG, as_of=AS_OF)
            made[name] = (write_report(con, "4.12", CONFIG, out / f"{name}.html", result=result), result)
    return made


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text inside each element that has an id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: dict[str, str] = {}
        self._open: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self._open.append((tag, dict(attrs).get("id")))

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        for _, element_id in self._open:
            if element_id:
                self.text[element_id] = self.text.get(element_id, "") + data


def _parse(page: str) -> _Tags:
    p = _Tags()
    p.feed(page)
    return p


URL_ATTRS = ("src", "href", "xlink:href", "srcset", "data", "poster", "action", "formaction")


def _fetched_urls(page: str) -> list[str]:
    """Everything a browser would fetch for this page: URL attributes (<script src>, <link href>, ...)
    other than in-page anchors, and CSS url() / @import."""
    found = []
    for tag, attrs in _parse(page).tags:
        for name in URL_ATTRS:
            value = attrs.get(name)
            if value and not value.startswith("#"):
                found.append(f"<{tag} {name}={value}>")
    for style in re.findall(r"<style[^>]*>(.*?)</style>", page, flags=re.S | re.I):
        found += re.findall(r"url\([^)]*\)|@import[^;]*", style)
    return found


# ------------------------------------------------------------------ the page itself


def test_report_is_self_contained(reports):
    for path, _ in reports.values():
        page = path.read_text()
        assert _fetched_urls(page) == []
        assert not re.search(r"<script[^>]+src\s*=", page, flags=re.I)
        assert not re.search(r"<link[^>]+href\s*=", page, flags=re.I)
        assert "vegaEmbed" in page and len(page) < 5_000_000  # the bundle is inlined, the data kept small


def test_the_self_containment_check_catches_external_references():
    page = ('<html><head><link rel="stylesheet" href="https://cdn.example/x.css">'
            '<style>@import "https://cdn.example/y.css"; body{background:url(https://cdn.example/z.png)}</style>'
            '<script src="https://cdn.jsdelivr.net/npm/vega@6"></script></head>'
            '<body><a href="#top">x</a></body></html>')
    found = _fetched_urls(page)
    assert len(found) == 4 and all("cdn" in f for f in found)


def test_report_shows_the_gates_verdict_table_and_chart_divs(reports):
    for name, (path, result) in reports.items():
        page = path.read_text()
        parsed = _parse(page)
        assert parsed.text["verdict-text"] == result.verdict
        ids = {attrs.get("id") for _, attrs in parsed.tags}
        assert {f"chart-{c}" for c in CHARTS} <= ids
        assert VERDICT_COLOURS[result.verdict] in page
        for s in result.segments:
            assert f">{s.key}</th>" in page
        window = f"{result.window_start:%Y-%m-%d %H:%M} .. {result.as_of:%Y-%m-%d %H:%M} UTC"
        assert window in page
        edge_rows = sum(s.rows for s in result.segments)
        assert f"{edge_rows:,} edge rows judged by the gate" in page
        failing_cells = [a for t, a in parsed.tags if t == "td" and "fail" in (a.get("class") or "").split()]
        failed_checks = [c for s in result.segments if s.decision != "insufficient_data"  # unjudged: no mark
                         for c in s.checks.values() if c.status == "fail"]
        assert len(failing_cells) == len(failed_checks)
        if name == "postmortem":
            assert result.verdict == "rollback_to_cloud" and failing_cells
            assert f"{QUARANTINED:,} rows of release 4.12 failed the data contract" in page
            # the measured value and its threshold, as the gate has them
            seg = next(s for s in result.segments if "peak_memory" in s.failed_gates)
            peak = seg.checks["peak_memory"]
            assert f"<b>{percent(peak.measured)} ✗</b><small>≤ {percent(peak.threshold)}</small>" in page  # 47% ≤ 40%
        else:
            assert result.verdict == "keep_edge" and not failing_cells
            assert "0 rows of release 4.12 failed the data contract" in page


def test_report_shows_the_result_it_is_given_without_evaluating_again(warehouses, tmp_path, monkeypatch):
    import pipeline.gate.evaluate

    with db.reading(warehouses["healthy"]) as con:
        use_settings(con, CONFIG)
        result = evaluate_gate(con, "4.12", CONFIG, as_of=AS_OF)
        result.judged[0].checks["peak_memory"].status = "fail"  # the verdict is derived: only this object has it
        n = len(result.judged)

        def no_second_evaluation(*args, **kwargs):
            raise AssertionError("write_report evaluated the gate again")

        monkeypatch.setattr(pipeline.gate.evaluate, "evaluate_gate", no_second_evaluation)
        page = write_report(con, "4.12", CONFIG, tmp_path / "r.html", result=result).read_text()
    assert _parse(page).text["verdict-text"] == "partial_rollback"
    assert f"1 of {n} judged segments roll back" in page
    with pytest.raises(ValueError, match="not '4.11'"):
        with db.reading(warehouses["healthy"]) as con:
            write_report(con, "4.11", CONFIG, tmp_path / "x.html", result=result)


def test_report_without_a_result_evaluates_the_gate_as_of(warehouses, tmp_path):
    with db.reading(warehouses["postmortem"]) as con:
        page = write_report(con, "4.12", CONFIG, tmp_path / "deep" / "r.html", as_of=AS_OF).read_text()
    assert _parse(page).text["verdict-text"] == "rollback_to_cloud"
    assert "2026-11-13 00:00 .. 2026-11-27 00:00 UTC" in page


def test_index_lists_releases_and_verdicts_with_links(reports, warehouses, tmp_path):
    results = [r for _, r in reports.values()]
    stories = []
    for name, r in zip(reports, results, strict=True):
        with db.reading(warehouses[name]) as con:
            stories.append(read_story(con, r.to_dict(), CONFIG))
    index = write_index(tmp_path, results, stories)
    page = index.read_text()
    hrefs = [a["href"] for t, a in _parse(page).tags if t == "a"]
    assert hrefs == [report_filename("4.12")] * 2  # relative: the folder moves as a whole
    assert "rollback_to_cloud" in page and "keep_edge" in page
    assert '<td class="routes">' + stories[0].routes_text() + "</td>" in page
    assert [u for u in _fetched_urls(page) if not u.startswith("<a ")] == []
    assert report_filename("4.12/../x y") == "report-4.12_.._x_y.html"


def test_nightly_hook_writes_a_report_per_release_and_the_index(tmp_path):
    path = _load(tmp_path / "two.duckdb", pa.concat_tables([
        generate("4.11", 20_000, "healthy", seed=2, start=START, days=7),
        generate("4.12", 20_000, "postmortem", seed=2, start=START, days=7)]))
    with db.reading(path) as con:
        use_settings(con, CONFIG)
        results = [evaluate_gate(con, r, CONFIG, as_of=AS_OF) for r in ("4.11", "4.12")]
        index = write_reports(con, results, CONFIG, tmp_path / "reports")
    assert sorted(p.name for p in index.parent.iterdir()) == ["index.html", "report-4.11.html", "report-4.12.html"]
    parsed = _parse(index.read_text())
    assert [a["href"] for t, a in parsed.tags if t == "a"] == ["report-4.11.html", "report-4.12.html"]
    for r in results:
        assert _parse((index.parent / report_filename(r.release)).read_text()).text["verdict-text"] == r.verdict
        assert f">{r.verdict}</span>" in index.read_text()


def test_gate_and_help_do_not_import_altair():
    code = ("import sys\n"
            "import pipeline.cli.main, pipeline.gate.evaluate, pipeline.views.render, pipeline.jobs.nightly\n"
            "import pipeline.views.report\n"
            "pipeline.cli.main.build_parser().format_help()\n"
            "heavy = sorted(m for m in ('altair', 'vl_convert') if m in sys.modules)\n"
            "assert not heavy, heavy\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr


# ------------------------------------------------------------------ in a real browser, offline


def _chromium() -> str:
    return program("chromium")


def _offline_prefix() -> list[str]:
    """A network namespace with no interfaces but loopback (down), where the kernel allows one."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True, timeout=30).returncode == 0:
        return [unshare, "-n"]
    return []


def _render(page: Path, tmp: Path, width: int = 1400) -> tuple[str, str, Path]:
    """Run headless Chromium once on `page` with the network off, in a window `width` px wide:
    (DOM after the scripts, console lines of the page, screenshot)."""
    shot = tmp / f"{page.stem}-{width}.png"
    cmd = _offline_prefix() + [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--mute-audio",
        # with or without the namespace: no name resolves and every request goes to a dead proxy
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
        f"--user-data-dir={tmp / ('profile-' + page.stem)}", "--enable-logging=stderr", "--v=0",
        "--virtual-time-budget=10000", f"--window-size={width},3000", f"--screenshot={shot}", "--dump-dom",
        page.resolve().as_uri()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the browser and its helpers: the group this test started
        proc.communicate()
        pytest.fail(f"chromium did not finish {page.name} within {CHROMIUM_TIMEOUT} s")
    assert proc.returncode == 0, err[-3000:]
    console = [line for line in err.splitlines() if ":CONSOLE" in line and "source: file://" in line]
    return out, "\n".join(console), shot


class _Svgs(HTMLParser):
    """Per chart div: the number of elements inside its <svg>s (marks, axes, legends)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.inside: dict[str, int] = {}
        self.svgs: dict[str, int] = {}
        self.chart: str | None = None
        self.chart_depth = 0
        self.svg_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element_id = dict(attrs).get("id") or ""
        if tag == "div" and element_id.startswith("chart-") and self.chart is None:
            self.chart, self.chart_depth = element_id, len(self.stack)
            self.inside[element_id], self.svgs[element_id] = 0, 0
        if self.chart and tag == "svg":
            self.svgs[self.chart] += 1
            self.svg_depth += 1
        elif self.chart and self.svg_depth:
            self.inside[self.chart] += 1
        self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.chart and self.svg_depth:
            self.inside[self.chart] += 1

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            top = self.stack.pop()
            if top == "svg" and self.svg_depth:
                self.svg_depth -= 1
            if self.chart and len(self.stack) == self.chart_depth:
                self.chart = None
            if top == tag:
                break


def _png_rows(path: Path, rows: int) -> list[bytes]:
    """The first `rows` rows of an 8-bit RGB or RGBA, non-interlaced PNG (Chromium's screenshots), as RGB."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompressobj().decompress(idat, (width * bpp + 1) * rows)
    stride, prev, out = width * bpp, bytearray(width * bpp), []
    for y in range(min(rows, height)):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa_, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa_ <= pb and pa_ <= pc else b if pb <= pc else c)) & 255
        prev = line
        out.append(bytes(line) if bpp == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3))
    return out


def _verdict_banner(shot: Path, colour: str, rows: int = 320) -> tuple[int, int]:
    """(pixels of the verdict's colour, light pixels on the rows where that colour dominates) at the top."""
    target = bytes.fromhex(colour.lstrip("#"))
    coloured = light = 0
    for line in _png_rows(shot, rows):
        pixels = [line[i:i + 3] for i in range(0, len(line), 3)]
        n = sum(1 for p in pixels if all(abs(p[k] - target[k]) <= 6 for k in range(3)))
        coloured += n
        if n > len(pixels) // 2:
            light += sum(1 for p in pixels if min(p) >= 225)
    return coloured, light


@pytest.mark.parametrize("scenario", ["postmortem", "healthy"])
def test_every_chart_draws_offline_in_headless_chromium(reports, scenario, tmp_path):
    path, result = reports[scenario]
    dom, console, shot = _render(path, tmp_path)
    assert console == "", f"the page logged to the console:\n{console}"
    status = re.search(r'<p id="report-status"[^>]*data-drawn="(\d+)" data-errors="(\d+)"', dom)
    assert status and status.groups() == (str(len(CHARTS)), "0"), re.findall(r'<p id="report-status".*?</p>', dom)
    svgs = _Svgs()
    svgs.feed(dom)
    for chart in CHARTS:
        key = f"chart-{chart}"
        assert svgs.svgs.get(key) == 1, (key, svgs.svgs)
        assert svgs.inside[key] > 20, f"{key}: an empty drawing ({svgs.inside[key]} elements)"
    assert f'id="verdict-text">{result.verdict}</strong>' in dom
    assert shot.stat().st_size > 50_000  # a page with pictures, not a blank one
    coloured, light = _verdict_banner(shot, VERDICT_COLOURS[result.verdict])
    assert coloured > 20_000, "the verdict banner is not at the top of the screenshot in its colour"
    assert light > 300, "no light (text) pixels on the verdict banner"
    keep = os.environ.get("REPORT_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / f"report-{scenario}.png")


def test_the_browser_check_sees_a_page_that_needs_the_network(reports, tmp_path):
    """A control: the same page with its inlined Vega replaced by a CDN <script src> draws nothing
    offline, and the checks above notice (console error, no SVG)."""
    page = reports["healthy"][0].read_text()
    start = page.index("<script>")
    end = page.index("</script>", start) + len("</script>")
    broken = tmp_path / "needs-network.html"
    broken.write_text(page[:start] + '<script src="https://cdn.jsdelivr.net/npm/vega-embed@7"></script>' + page[end:])
    dom, console, _ = _render(broken, tmp_path)
    assert "vegaEmbed is not defined" in console
    svgs = _Svgs()
    svgs.feed(dom)
    assert all(n == 0 for n in svgs.svgs.values()) and len(svgs.svgs) == len(CHARTS)


def test_report_of_an_empty_window_says_insufficient_data(warehouses, tmp_path):
    with db.reading(warehouses["healthy"]) as con:
        page = write_report(con, "4.12", CONFIG, tmp_path / "r.html", as_of=datetime(2027, 3, 1)).read_text()
    assert _parse(page).text["verdict-text"] == "insufficient_data"
    assert "the release has no rows in the evaluation window" in page
    assert "0 edge rows judged by the gate; 0 cloud rows in the window" in page


LAYOUT_PROBE = """<script>
(function probe() {
  var status = document.getElementById("report-status");
  if (!status.dataset.drawn) { setTimeout(probe, 50); return; }
  var view = document.documentElement.clientWidth;
  var wrap = document.querySelector(".table-wrap");
  var out = {view: view, page: document.documentElement.scrollWidth, decision: [], charts: {},
             table: [wrap.clientWidth, wrap.scrollWidth]};
  function seen(el) {  // on screen, and not cut off by a scrolling box around it
    var r = el.getBoundingClientRect(), box = el.closest(".table-wrap");
    var right = box ? Math.min(view, box.getBoundingClientRect().right) : view;
    return r.width > 0 && r.left >= 0 && r.right <= right + 0.5;
  }
  document.querySelectorAll("table.gates .decision").forEach(function (el) { out.decision.push(seen(el)); });
  document.querySelectorAll("div.vis").forEach(function (el) {
    var svg = el.querySelector("svg");
    out.charts[el.id] = !!svg && seen(svg);
  });
  var pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _page_order(page: str) -> list[tuple[str, str, str, str]]:
    """(segment, route, why, own decision) of every row of the gate table, top to bottom."""
    return re.findall(r'<th scope="row" class="seg">([^<]+)</th><td class="route ([a-z_]+)" title="([^"]*)">'
                      r'[^<]*</td><td class="decision ([a-z_]+)"', page)


def test_report_lists_failing_segments_first_and_links_to_the_index(reports, warehouses, tmp_path):
    page = reports["postmortem"][0].read_text()
    decisions = [d for _, _, _, d in _page_order(page)]
    assert decisions == sorted(decisions, key=["rollback_to_cloud", "keep_edge", "insufficient_data"].index)
    assert decisions[0] == "rollback_to_cloud" and "insufficient_data" in decisions
    assert 'id="index-link"' not in page  # a page on its own has no index to go back to
    with db.reading(warehouses["postmortem"]) as con:
        use_settings(con, CONFIG)
        write_reports(con, [reports["postmortem"][1]], CONFIG, tmp_path / "site")
    linked = (tmp_path / "site" / report_filename("4.12")).read_text()
    assert '<a id="index-link" href="index.html">&larr; all releases</a>' in linked


def test_charts_share_one_scale_per_group_and_rates_start_at_zero(reports):
    page = reports["postmortem"][0].read_text()
    specs = json.loads(re.search(r"var specs = (\{.*?\});\n", page, flags=re.S).group(1))
    assert specs["latency"]["resolve"] == {"scale": {"y": "shared"}}
    assert specs["memory"]["resolve"] == {"scale": {"y": "shared"}}
    daily_y = specs["daily"]["spec"]["encoding"]["y"]
    assert daily_y["scale"] == {"zero": True} and daily_y["axis"]["format"] == "%"


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_decision_column_and_every_chart_are_visible_at(reports, width, tmp_path):
    path, result = reports["postmortem"]
    probed = tmp_path / f"probe-{width}.html"
    page = path.read_text()
    end = page.rindex("</body>")  # the page's own: the inlined Vega has the string too
    probed.write_text(page[:end] + LAYOUT_PROBE + page[end:])
    dom, console, shot = _render(probed, tmp_path, width=width)
    assert console == "", console
    layout = json.loads(html.unescape(re.search(r'<pre id="layout">(.*?)</pre>', dom, flags=re.S).group(1)))
    assert layout["view"] <= width and layout["page"] == layout["view"]  # the page itself never scrolls sideways
    if width >= 1280:  # nor the gate table inside its box: every gate's column in view at once
        assert layout["table"][1] <= layout["table"][0], layout["table"]
    assert len(layout["decision"]) == len(result.segments) + 1 and all(layout["decision"]), layout["decision"]
    assert layout["charts"] == {f"chart-{c}": True for c in CHARTS}, layout["charts"]
    assert struct.unpack(">II", shot.read_bytes()[16:24])[0] == width  # the screenshot is that wide
    coloured, _ = _verdict_banner(shot, VERDICT_COLOURS[result.verdict])
    assert coloured > 20_000
    keep = os.environ.get("REPORT_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / f"report-postmortem-{width}.png")
