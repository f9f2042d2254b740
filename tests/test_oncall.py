"""What the person on call reads: `pipeline gate` and `explain` on the demo data (sample_logs
ingested for real), at 80 and 200 columns and on a real pseudo-terminal (colour, NO_COLOR), and
the one-line errors of every command (exit 2, no traceback)."""

from __future__ import annotations

import fcntl
import html
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from conftest import ROOT, valid_table, write

AS_OF = "2026-12-01"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TERM")}
    return {**env, "TERM": "xterm", **extra}


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True,
                          env=_env(**env), timeout=240, cwd=ROOT)


def on_terminal(*args: str, columns: int = 120, **env: str) -> tuple[int, str]:
    """The command with its stdout on a real pseudo-terminal of `columns` columns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", *args], stdin=slave, stdout=slave,
                            stderr=subprocess.PIPE, env=_env(**env), cwd=ROOT)
    os.close(slave)
    shown = _drain(master)
    proc.communicate(timeout=240)  # reads and closes its stderr pipe
    return proc.returncode, shown.replace("\r\n", "\n")


def _drain(master: int) -> str:
    """What a child wrote to its pseudo-terminal, until it closed it."""
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return b"".join(chunks).decode()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The demo database: sample_logs ingested by the real command."""
    path = tmp_path_factory.mktemp("demo") / "telemetry.duckdb"
    proc = cli("ingest", "--db", str(path), "sample_logs")
    assert proc.returncode == 0, proc.stderr
    return path


def gate(demo: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    return cli("gate", "--db", str(demo), "--release", "4.12", "--as-of", AS_OF, "--no-alerts", *extra, **env)


HEADER = ('segment                     rows  peak mem  resident mem  killed   p95 ms   cold start ms  quality loss  '
          'return drop (obs)  detected  fallback    weak-net ms  rise °C  day cap (obs)')


def test_gate_says_the_verdict_first_then_the_routes_then_each_group_of_segments(demo):
    proc = gate(demo)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:10] == [
        "verdict for release 4.12: ROLLBACK_TO_CLOUD - a release-wide gate failed",
        "routes: 36 to cloud",
        "36 segments: 14 judged (12 fail their own gates, 2 pass), 22 not judged (insufficient data); "
        "window 2026-11-17 .. 2026-11-30 UTC (14 whole days)",
        "release-wide quality loss 15.6% (threshold 3%, p < 0.001, decision interval 12.7% to 18.4% at alpha 0.5%): "
        "fail",
        "release-wide kill rate 3.5% (threshold 1%, p < 0.001, decision interval 2.4% to 4.8% at alpha 0.5%): fail",
        "assignment: hold-back 20.35% of 19,145 online requests, none declared (assignment.holdback_share); each "
        "task x tier held to it: pass",
        "",
        HEADER,
        "to cloud (12): with the whole release; own gates fail",
        'intent/high/normal         1,079    23.3%          11.5%   0.3%     1,136             360        13.5%X    '
        '              -    97.7%      4.9%               -     0.8              0%',
    ]
    # two segments pass their own gates and still go to the cloud: the release-wide gates failed; never listed
    # as "keep edge" beside a release rolled back as a whole
    passing = "to cloud (2): with the whole release; own gates pass"
    assert lines[lines.index(passing) - 1].startswith("summarize/mid/normal       1,124    31.2%")
    assert "keep edge" not in proc.stdout
    # too few devices in its pool to show its loss on its own: marked ~ (past the threshold, not yet proven),
    # and its own evidence says what it would take
    assert lines[lines.index(passing) + 1].startswith("intent/flagship/normal       470    15.5%")
    assert any(ln.startswith("own evidence: intent/flagship/normal passes its own gates; quality loss 10.6% past "
                             "<= 3%, not proven at alpha 0.63%: about ") for ln in lines)
    assert ('threshold rewrite                   <=40%          <=25%   <=1%   <=10,000          <=500         <=3%  '
            '              <=1%    >=90%     <=25%    <cloud 9,275   <=5.0            <=5%') in lines  # the cloud's
    assert ("to cloud (22): with the whole release; not judged: 22 have too few rows (need 20-190 more); --all "
            "lists them") in lines
    assert "killed = kill_rate (share)" in proc.stdout and "return drop (obs) = retention (share)" in proc.stdout
    assert "peak mem = peak_memory (ratio of RAM)" in proc.stdout
    assert "day cap (obs) = daily_edge_seconds (share)" in proc.stdout
    assert not [ln for ln in lines if ln.startswith("intent/flagship/offline")]  # summarised, not listed
    everything = gate(demo, "--all").stdout.splitlines()
    assert "to cloud (22): with the whole release; not judged" in everything
    assert len([ln for ln in everything if re.match(r"(intent|rewrite|summarize)/", ln)]) == 36


def test_gate_fits_80_columns_and_keeps_the_failing_gates(demo):
    lines = gate(demo, COLUMNS="80").stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    assert lines[2:4] == ["36 segments: 14 judged (12 fail their own gates, 2 pass), 22 not judged",
                          "  (insufficient data); window 2026-11-17 .. 2026-11-30 UTC (14 whole days)"]  # wrapped
    assert lines[11] == "segment                     rows  peak mem   p95 ms   quality loss  rise °C"
    assert "rewrite/low/normal         1,496      47%X   17,070X        19.8%X     9.7X" in lines
    assert ("8 gate columns hidden to fit 80 columns (resident mem, killed, cold start ms, return drop (obs), "
            "detected, fallback, weak-net ms, day cap (obs)); --wide shows them all") in " ".join(ln.strip()
                                                                                              for ln in lines)


def test_gate_at_200_columns_shows_every_gate_and_wide_shows_full_names(demo):
    lines = gate(demo, COLUMNS="200").stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 200
    assert lines[7] == HEADER and not [ln for ln in lines if "hidden" in ln]
    wide = gate(demo, "--wide", COLUMNS="80").stdout.splitlines()
    assert max(len(ln) for ln in wide) > 80
    assert wide[wide.index("") + 1].split()[2:] == [
        "peak_memory", "resident_memory", "kill_rate", "inference_duration", "cold_start", "quality_loss", "retention",
        "(obs)", "failure_detectability", "fallback_rate", "weak_network_latency", "thermal", "daily_edge_seconds",
        "(obs)"]


def test_gate_is_coloured_on_a_terminal_unless_no_color(demo):
    args = ("gate", "--db", str(demo), "--release", "4.12", "--as-of", AS_OF, "--no-alerts")
    code, out = on_terminal(*args, columns=120)
    assert code == 1
    assert out.startswith("\x1b[1;31mverdict for release 4.12: ROLLBACK_TO_CLOUD")
    assert "\x1b[31m    47%X\x1b[0m" in out  # a failing enforced cell in red
    assert max(len(ANSI.sub("", ln)) for ln in out.splitlines()) <= 120  # the terminal's own width
    for extra, env in (((), {"NO_COLOR": "1"}), (("--no-color",), {})):
        code, plain = on_terminal(*args, *extra, columns=120, **env)
        assert code == 1 and "\x1b[" not in plain
        assert plain.splitlines() == ANSI.sub("", out).splitlines()


def test_explain_speaks_in_units_within_the_width(demo):
    proc = cli("explain", "--db", str(demo), "--release", "4.12", "--as-of", AS_OF, "--segment", "rewrite/low/normal",
               COLUMNS="80")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    assert lines[0] == "release 4.12, segment rewrite/low/normal: ROLLBACK_TO_CLOUD"
    text = " ".join(ln.strip() for ln in lines)
    assert ("p95 47% of RAM; decision interval 46.8% to 47.7% of RAM (at alpha 5%, the level its test had); "
            "threshold <= 40% of RAM") in text
    assert "p95 17,070 ms; decision interval 15,995 to 18,035 ms (at alpha 0.27%" in text
    assert "threshold <= 10,000 ms" in text
    assert "p95 9.7 °C" in text and "threshold <= 5.0 °C" in text
    assert not re.search(r"\d\.\d{4,}(?!\d*%)|e[+-]\d\d", text)  # no raw floats, no exponents (small alphas: 0.0095%)
    weak = cli("explain", "--db", str(demo), "--release", "4.12", "--as-of", AS_OF, "--segment", "rewrite/mid/weak")
    assert "cloud p95 9,275 ms (baseline: task x bucket (all tiers))" in weak.stdout
    # the cloud's own p95, a fixed 95 % interval from exact ranks of the histogram's order statistics (widened by
    # its error), labelled as not the decision's; the edge's decision interval is the mixture SPRT's, at the
    # level its test had
    assert "cloud p95 95% interval 8,350 to 10,510 ms (for reading: not the decision's)" in weak.stdout
    assert "p95 10,626 ms; decision interval 9,605 to 12,458 ms (at alpha 0.3%, the level its test had)" in weak.stdout


def test_explain_json_has_the_figures_with_their_units(demo):
    proc = cli("explain", "--db", str(demo), "--release", "4.12", "--as-of", AS_OF, "--segment", "rewrite/low/normal",
               "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["segment"], out["decision"], out["rows"]) == ("rewrite/low/normal", "rollback_to_cloud", 1496)
    peak = next(g for g in out["gates"] if g["gate"] == "peak_memory")
    assert (peak["unit"], peak["status"], peak["threshold"]) == ("ratio of RAM", "fail", 0.4)
    assert (peak["measured_text"], peak["threshold_text"]) == ("47% of RAM", "<= 40% of RAM")
    gates = [g["gate"] for g in out["gates"]]
    assert gates[:4] == ["peak_memory", "resident_memory", "kill_rate", "inference_duration"]
    kills = next(g for g in out["gates"] if g["gate"] == "kill_rate")
    assert (kills["unit"], kills["status"], kills["threshold_text"]) == ("share", "fail", "<= 1%")
    assert out["assignment"]["scopes"][0]["scope"] == "release" and out["assignment"]["scopes"][1]["scope"] == \
        "rewrite/low"


# ------------------------------------------------------------------ errors: one line, exit 2


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("args, expected", [
    (("sql", "SELECT * FROM evnts"),
     'pipeline sql: error: Catalog Error: Table with name evnts does not exist! Did you mean "events"?'),
    (("sql", ""), 'pipeline sql: error: no SQL given; e.g. pipeline sql "SELECT count(*) FROM events"'),
    (("sql", "DROP TABLE events"),
     "pipeline sql: error: DROP is refused: only read statements run here (SELECT, WITH, FROM, VALUES, TABLE, "
     "DESCRIBE, SHOW, SUMMARIZE or EXPLAIN of one of them)"),
    (("query", "edge_vs_cloud_latency", "--param", "release=4.12", "--param", "since=yesterday"),
     "pipeline query: error: --param since='yesterday': query edge_vs_cloud_latency expects since as an ISO date "
     "such as 2026-11-24"),
    (("query", "ingest_history", "--param", "limit=abc"),
     "pipeline query: error: --param limit='abc': query ingest_history expects limit as a whole number such as 50"),
    (("query", "adoption", "--param", "release=4.13"),
     "pipeline query: error: no release '4.13' in the database; releases present: 4.11, 4.12. "
     "Did you ingest its files? (pipeline ingest PATH)"),
    (("history", "--release", "4.13"),
     "pipeline history: error: no release '4.13' in the database; releases present: 4.11, 4.12. "
     "Did you ingest its files? (pipeline ingest PATH)"),
    (("gate", "--release", "4.13"),
     "pipeline gate: error: no release '4.13' in the database; releases present: 4.11, 4.12. "
     "Did you ingest its files? (pipeline ingest PATH)"),
    (("gate", "--relase", "4.12"),
     "pipeline gate: error: unrecognized arguments: --relase 4.12; --relase is not an option here: "
     "did you mean --release? (see pipeline gate --help)"),
    (("explain", "--relase", "4.12", "--segment", "rewrite/low/weak"),
     "pipeline explain: error: the following arguments are required: --release; --relase is not an option here: "
     "did you mean --release? (see pipeline explain --help)"),
])
def test_each_mistake_is_one_line_naming_it(demo, args, expected):
    assert _one_line_error(cli(*args, "--db", str(demo))) == expected


def test_a_mistyped_command_and_a_two_part_segment_get_the_right_form(demo):
    line = _one_line_error(cli("gat", "--release", "4.12"))
    assert line.endswith("; did you mean gate? (see pipeline --help)")
    line = _one_line_error(cli("explain", "--db", str(demo), "--release", "4.12", "--segment", "rewrite/low"))
    assert line.startswith("pipeline explain: error: --segment 'rewrite/low' is not of the form TASK/TIER/BUCKET "
                           "(e.g. rewrite/mid/weak); segments of release 4.12: intent/flagship/normal, ")
    assert len(line.partition("segments of release 4.12: ")[2].split(", ")) == 36  # every one


def test_yaml_syntax_errors_name_line_and_column(tmp_path):
    config = tmp_path / "gates.yaml"
    config.write_text("version: 1\ngates:\n  peak_memory:\n    max_p95_ratio: 0.4\n   mode: enforce\n")
    assert _one_line_error(cli("gate", "--check-config", "--config", str(config))) == (
        f"pipeline gate: error: {config}: not valid YAML at line 5, column 4: did not find expected key")
    candidate = tmp_path / "task.yaml"
    candidate.write_text("task: [rewrite, summarize\nname: x\n")
    assert _one_line_error(cli("admit", str(candidate))) == (
        f"pipeline admit: error: {candidate}: not valid YAML at line 2, column 5: did not find expected ',' or ']'")


def test_global_options_are_taken_after_the_command_too(demo):
    after = gate(demo, "--debug", "--log-format", "json", "--json")
    assert after.returncode == 1 and json.loads(after.stdout)["verdict"] == "rollback_to_cloud"
    before = cli("--db", str(demo), "--debug", "gate", "--release", "4.12", "--as-of", AS_OF, "--no-alerts", "--json")
    assert before.returncode == 1 and json.loads(before.stdout) == {**json.loads(after.stdout),
                                                                   "evaluated_at": json.loads(before.stdout)[
                                                                       "evaluated_at"]}


def test_admit_takes_several_files():
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "gates" / "candidates").glob("*.yaml"))
    proc = cli("admit", *files, "--json")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == len(files) == 4


def test_every_command_shows_an_example_and_simulate_lists_its_scenarios():
    from pipeline.cli.main import build_parser
    from pipeline.planning.simulate import SCENARIOS

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        assert re.search(rf"\nexamples:\n  pipeline {name}\b", parser.format_help()), name
    assert ", ".join(SCENARIOS) in " ".join(cli("simulate", "--help").stdout.split())


def test_tables_print_words_cut_wide_cells_and_a_closed_pipe_ends_silently(demo):
    assert gate(demo).returncode == 1  # stores 4.12's evaluation for `history`
    rows = cli("history", "--db", str(demo), "--release", "4.12", "--format", "csv").stdout.splitlines()
    assert rows[0].startswith("evaluation_id,evaluated_at,as_of,verdict,")
    assert '"inference_duration, kill_rate, peak_memory, quality_loss, ' in rows[1] and "['" not in rows[1], rows[1]
    table = cli("history", "--db", str(demo), "--release", "4.12", "--format", "table").stdout.splitlines()
    widths = [len(cell) for cell in table[1].split("  ") if cell]  # the dashes under each column
    assert max(widths) == 60 and "  inference_duration, kill_rate, peak_memory, quality_loss,...  " in table[2]
    # a reader that stops early (`| head`) ends the command without a word; its exit is never a verdict's
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "sql", "--db", str(demo), "--format", "csv",
                             "SELECT repeat('x', 4000000) AS x"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(), cwd=ROOT)
    assert proc.stdout.read(1) == b"x"
    proc.stdout.close()
    _, err = proc.communicate(timeout=240)
    assert (proc.returncode, err) == (2, b"")


def test_the_borderline_mark_is_rare_on_a_healthy_release_and_unjudged_segments_show_no_failure(demo):
    """`~` marks a figure past its threshold that is not yet proven; an interval that merely holds the threshold
    (most checks of a young release) is not marked. A segment too small to judge shows no failure mark."""
    done = cli("gate", "--db", str(demo), "--release", "4.11", "--as-of", AS_OF, "--no-alerts", "--dry-run",
               "--json")
    checks = [c for s in json.loads(done.stdout)["segments"] for c in s["metrics"].values()
              if c["status"] != "not_applicable"]
    marked = sum(c["borderline"] for c in checks)
    assert len(checks) == 367 and marked == 7, (len(checks), marked)  # was 193 of 367 (an interval holding it)
    assert all(c["status"] == "pass" for c in checks if c["borderline"])
    shown = gate(demo, "--all", "--wide", "--dry-run", COLUMNS="400").stdout.splitlines()
    start = shown.index("to cloud (22): with the whole release; not judged")  # 4.12's, the last group
    rows = [line for line in shown[start + 1:] if re.match(r"\w+/\w+/\w+ +[\d,]+ ", line)]
    assert len(rows) == 22 and not any(re.search(r"\dX|\d~", line) for line in rows), rows
    assert any("47%" in line for line in rows)  # rewrite/low/weak's figures are shown, unmarked


ROUTE_HEADING = re.compile(r"(to cloud|keep edge|edge, cloud check on|to the previous edge model) \(\d+\): (.*)")


def _terminal_groups(stdout: str) -> dict[str, tuple[str, str]]:
    """segment -> (route words, the rest of the heading of the group the terminal lists it under)."""
    heading, shown = None, {}
    for line in stdout.splitlines():
        found = ROUTE_HEADING.match(line)
        if found:
            heading = found.groups()
        elif heading and re.match(r"\w+/\w+/\w+ +[\d,]+ ", line):
            shown[line.split()[0]] = heading
    return shown


def test_every_output_tells_each_segment_the_same_route_and_why(demo, tmp_path):
    """The routing table, `state --json`, the terminal, the report and its index, and the alert tell one story
    per segment: the route the app follows and why (pipeline/views/story.py). On the demo 4.12 every segment goes
    to the cloud with the release (its release-wide gates failed), the two that pass their own gates included;
    on 4.11 the judged segments keep the edge and the rest wait on the cloud check."""
    import shutil
    from datetime import datetime

    import duckdb

    from pipeline.common.config import load_config
    from pipeline.gate.evaluate import evaluate_gate
    from pipeline.views.report import write_reports
    from pipeline.warehouse import db
    from pipeline.warehouse.aggregate import use_settings

    path = tmp_path / "told.duckdb"
    shutil.copy(demo, path)
    expected = {"4.12": {"cloud": 36}, "4.11": {"edge_with_cloud_check": 22, "edge": 14}}
    tables = {}
    for release, counts in expected.items():
        routing = tmp_path / f"routing-{release}.json"
        term = cli("gate", "--db", str(path), "--release", release, "--as-of", AS_OF, "--no-alerts", "--all",
                   "--routing-out", str(routing), COLUMNS="400")
        assert term.returncode == (1 if release == "4.12" else 0), term.stderr
        table = {f"{r['task']}/{r['device_tier']}/{r['network_bucket']}": (r["route"], r["cause"], r["reason"])
                 for r in json.loads(routing.read_text())["routes"]}
        tables[release] = table
        routes = [route for route, _, _ in table.values()]
        assert {r: routes.count(r) for r in set(routes)} == counts
        state = json.loads(cli("state", "--db", str(path), "--release", release, "--json").stdout)
        assert {r["segment"]: (r["route"], r["route_cause"], r["route_reason"]) for r in state["segments"]
                if r["segment"] != "release"} == table
        groups = _terminal_groups(term.stdout)
        assert set(groups) == set(table)
        for segment, (route, cause, _) in table.items():
            words, rest = groups[segment]
            if release == "4.12":
                assert (route, cause, words) == ("cloud", "release_wide", "to cloud")
                assert rest.startswith("with the whole release; ")
            elif cause == "not_judged":
                assert (route, words, rest) == ("edge_with_cloud_check", "edge, cloud check on", "not judged")
            else:
                assert (route, cause, words, rest) == ("edge", "own_gates", "keep edge", "own gates pass")
    config = load_config()
    with db.reading(path) as con:
        use_settings(con, config)
        results = [evaluate_gate(con, r, config, as_of=datetime.fromisoformat(AS_OF)) for r in expected]
        index = write_reports(con, results, config, tmp_path / "site")
    for release, table in tables.items():
        page = (index.parent / f"report-{release}.html").read_text()
        rows = re.findall(r'<th scope="row" class="seg">([^<]+)</th><td class="route ([a-z_]+)" title="([^"]*)">',
                          page)
        assert {seg: (route, html.unescape(why)) for seg, route, why in rows} == \
            {seg: (route, why) for seg, (route, _, why) in table.items()}
    index_rows = dict(re.findall(r'>([\d.]+)</a></td><td>.*?</td><td class="routes">([^<]*)</td>',
                                 index.read_text()))
    assert index_rows == {"4.12": "36 to cloud", "4.11": "22 edge, cloud check on, 14 keep edge"}
    with duckdb.connect(str(path), read_only=True) as con:
        [payload] = con.execute("SELECT payload FROM alerts WHERE release = '4.12' ORDER BY created_at DESC "
                                "LIMIT 1").fetchone()
    alert = json.loads(payload)
    assert alert["routes"] == {"cloud": 36}
    assert {s["segment"]: (s["route"], s["cause"], s["why"]) for s in alert["segments"]} == tables["4.12"]
    assert ("- to cloud (2): with the whole release; own gates pass: intent/flagship/normal, "
            "rewrite/flagship/normal") in alert["text"].splitlines()


def test_long_work_shows_progress_on_a_terminal_and_nothing_in_a_pipe(tmp_path):
    """tqdm's bar on stderr when stderr is a terminal; a pipe or a log gets only the result."""
    for i in range(5):
        write(valid_table(50, seed=70 + i), tmp_path / "land" / f"part-{i}.parquet")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "ingest", "--db", str(tmp_path / "t.duckdb"),
                             str(tmp_path / "land")], stdout=subprocess.PIPE, stderr=slave, env=_env(), cwd=ROOT)
    os.close(slave)
    shown = _drain(master)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0 and out.decode().startswith("5 files: 5 loaded"), out
    assert "100%" in shown and "5/5 [" in shown and "file/s" in shown, shown  # tqdm's bar, finished
    piped = cli("ingest", "--db", str(tmp_path / "u.duckdb"), str(tmp_path / "land"))
    assert piped.returncode == 0
    assert piped.stderr == f"pipeline ingest: created a new warehouse at {tmp_path / 'u.duckdb'}\n"
    from pipeline.planning.simulate import write_parquet  # simulate's steps: the rows, then each file

    told: list[tuple[int, int, str]] = []
    write_parquet(tmp_path / "sim", "9.9", 1_000, files=3, progress=lambda *step: told.append(step))
    assert told == [(0, 4, "generating 1,000 rows"), (1, 4, "1,000 rows generated"),
                    *[(i + 2, 4, f"part-{i}-healthy-s0.parquet") for i in range(3)]]


def test_gate_writes_a_junit_report_and_a_github_step_summary_that_tell_the_same(demo, tmp_path):
    """--junit: a testcase per segment (failed when its own gates fail, skipped when not judged) and per
    release-wide gate, parsed by junitparser; the step summary goes to $GITHUB_STEP_SUMMARY, appended."""
    from junitparser import Failure, JUnitXml, Skipped

    summary = tmp_path / "summary.md"
    summary.write_text("earlier step output\n")
    done = gate(demo, "--dry-run", "--junit", str(tmp_path / "junit.xml"), GITHUB_STEP_SUMMARY=str(summary))
    assert done.returncode == 1, done.stderr
    verdict = json.loads(gate(demo, "--dry-run", "--json").stdout)
    [suite] = list(JUnitXml.fromfile(str(tmp_path / "junit.xml")))
    cases = {case.name: case for case in suite}
    segments = {f"{s['task']}/{s['device_tier']}/{s['network_bucket']}": s for s in verdict["segments"]}
    assert set(cases) == set(segments) | {"release-wide quality_loss", "release-wide kill_rate"}
    for key, s in segments.items():
        kinds = {type(r) for r in cases[key].result}
        expected = {"rollback_to_cloud": {Failure}, "insufficient_data": {Skipped}, "keep_edge": set()}
        assert kinds == expected[s["decision"]], key
        assert cases[key].system_out.startswith("route: cloud (release_wide): release-wide rollback: ")
    assert (suite.tests, suite.failures, suite.skipped) == (38, 14, 22)
    kills = cases["intent/low/normal"].result[0].message
    assert "kill rate 13.1% (<= 1%) over the low tier" in kills
    text = summary.read_text()
    assert text.startswith("earlier step output\n### Release 4.12: ROLLBACK_TO_CLOUD\n")
    assert ("| to cloud (2): with the whole release; own gates pass | intent/flagship/normal, "
            "rewrite/flagship/normal |") in text


def test_the_step_summary_stays_under_githubs_cap_for_a_thousand_segments(demo):
    """1,000 segments (the demo's, repeated under other task names) fit in 1 MiB; past a cap, rows are counted."""
    from pipeline.views.ci import STEP_SUMMARY_LIMIT, step_summary
    from pipeline.views.story import ReleaseStory, SegmentStory

    verdict = json.loads(gate(demo, "--dry-run", "--json").stdout)
    base = [s for s in verdict["segments"] if s["decision"] == "rollback_to_cloud"]
    many = [{**s, "task": f"task{i}"} for i in range(84) for s in base][:1000]
    story = ReleaseStory("4.12", "rollback", tuple(
        SegmentStory(f"{s['task']}/{s['device_tier']}/{s['network_bucket']}", "cloud", "release_wide", "why",
                     s["decision"], "fails") for s in many))
    text = step_summary({**verdict, "segments": many}, story)
    assert len(text.encode()) < STEP_SUMMARY_LIMIT and text.count("\n| task") == 1000
    capped = step_summary({**verdict, "segments": many}, story, limit=20_000)
    assert len(capped.encode()) <= 20_000 and capped.rstrip().endswith("the step summary is capped at 20,000 bytes")


def test_a_gate_failed_for_want_of_proof_says_so_where_its_figure_is_on_the_safe_side():
    from pipeline.views.story import failed_text

    unproven = {"measured": 0.249446, "threshold": 0.4, "burden": "prove_safe", "interval": [0.244128, 0.444855]}
    broken = {**unproven, "measured": 0.421}
    harm = {**unproven, "burden": "prove_harm"}
    detect = {"measured": 0.97, "threshold": 0.95, "burden": "prove_safe", "interval": [0.91, 0.99]}  # a "min" gate
    assert failed_text({"peak_memory": unproven}, ["peak_memory"]) == (
        "peak memory 24.9% of RAM (<= 40% of RAM), not shown within it (could be 44.5% of RAM)")
    assert failed_text({"peak_memory": broken}, ["peak_memory"]) == "peak memory 42.1% of RAM (<= 40% of RAM)"
    assert failed_text({"peak_memory": harm}, ["peak_memory"]) == "peak memory 24.9% of RAM (<= 40% of RAM)"
    assert failed_text({"failure_detectability": detect}, ["failure_detectability"]) == (
        "failure detectability 97% (>= 95%), not shown within it (could be 91%)")
