"""Data-quality alarms of the nightly job: the real command over real landing folders, the alert
through the real outbox (stdout and JSONL sinks), exit code 4 only when the data looks wrong."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path

import duckdb
from conftest import NOW, run_cli, valid_table, with_values, write

from pipeline.common.config import load_config
from pipeline.jobs.nightly import run_nightly
from pipeline.warehouse import db


def alerts(db_path: Path) -> list[tuple]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute("SELECT release, verdict, severity, sink, status, payload FROM alerts "
                           "ORDER BY created_at, sink").fetchall()
    finally:
        con.close()


def config_file(tmp_path: Path, **alerts: object) -> Path:
    """gates/admission.yaml with a JSONL sink and the given alerts settings."""
    text = Path(load_config().source).read_text()
    extra = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in {"jsonl_path": str(tmp_path / "alerts.jsonl"),
                                                              **alerts}.items())
    path = tmp_path / "gates.yaml"
    path.write_text(text.replace('  jsonl_path: ""', "").replace("alerts:", "alerts:\n" + extra.rstrip("\n"), 1))
    return path


def test_a_landing_folder_whose_files_are_all_rejected_raises_the_alarm(tmp_path, db_path):
    land = tmp_path / "land"
    land.mkdir()
    (land / "garbage.parquet").write_bytes(b"not parquet at all")
    write(valid_table(50).drop_columns(["route"]), land / "no_route.parquet")
    (land / "events.csv").write_text("event_id,release\n1,4.12\n")
    cfg = config_file(tmp_path)
    proc = run_cli("nightly", "--db", str(db_path), "--landing", str(land), "--config", str(cfg))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    start = out.index("Data quality: 3 problems in nightly run 1")  # the alert, from the stdout sink
    assert out[start + 1].startswith(f"- 2 of 2 files rejected: {land / 'garbage.parquet'}: not a readable Parquet")
    assert out[start + 1].endswith(" (and 1 more)")
    assert out[start + 2:start + 4] == [
        f"- 1 file in {land} are not Parquet and were not read (e.g. events.csv); convert them: duckdb -c "
        f"\"COPY (FROM read_csv_auto('{land / 'events.csv'}')) TO '{land / 'events.parquet'}' (FORMAT parquet)\"",
        f"- no telemetry file has ever loaded (landing folder {land})"]
    assert "  DATA QUALITY: 2 of 2 files rejected: " in proc.stdout
    stored = alerts(db_path)
    assert [r[:5] for r in stored] == [("*", "data_quality", "warning", "jsonl", "delivered"),
                                       ("*", "data_quality", "warning", "stdout", "delivered")]
    sent = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [p["kind"] for p in sent[0]["problems"]] == ["rejected_files", "not_parquet", "no_new_data"]
    run = duckdb.connect(str(db_path), read_only=True).execute("SELECT status, summary FROM runs").fetchall()
    assert run[0][0] == "ok" and len(json.loads(run[0][1])["data_quality"]) == 3

    again = run_cli("nightly", "--db", str(db_path), "--landing", str(land), "--config", str(cfg))
    assert again.returncode == 4  # still nothing usable: still an alarm
    assert len(alerts(db_path)) == 2  # the same problems are not re-sent within alerts.repeat_interval_hours


def test_a_healthy_folder_stays_quiet(tmp_path, db_path):
    land = tmp_path / "land"
    write(valid_table(400, seed=3), land / "a.parquet")
    cfg = config_file(tmp_path)
    proc = run_cli("nightly", "--db", str(db_path), "--landing", str(land), "--config", str(cfg))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Data quality" not in proc.stdout and "DATA QUALITY" not in proc.stdout
    assert "  quality    no data-quality problem" in proc.stdout
    assert [r[1] for r in alerts(db_path) if r[1] == "data_quality"] == []
    again = run_cli("nightly", "--db", str(db_path), "--landing", str(land), "--config", str(cfg))
    assert again.returncode == 0  # nothing new, but the newest file is minutes old


def test_too_many_quarantined_rows_and_days_without_data(tmp_path, db_path):
    land = tmp_path / "land"
    table = valid_table(200, seed=4)
    for row in range(20):  # 10 % of the rows break a rule
        table = with_values(table, row, total_ms=-1.0)
    write(table, land / "a.parquet")
    config = dataclasses.replace(load_config(), alerts=dataclasses.replace(load_config().alerts, stdout=False))
    run, _ = run_nightly(db_path, land, config, as_of=NOW)
    assert run.status == "ok"
    assert run.data_quality == ["20 of 200 rows read were quarantined (10.0%, above alerts.max_quarantined_share "
                                "5%); see pipeline query quarantine_reasons"]
    lenient = dataclasses.replace(config, alerts=dataclasses.replace(config.alerts, max_quarantined_share=0.2))
    with db.writing(db_path) as con:  # the newest file landed three days ago
        con.execute("UPDATE files SET ingested_at = ingested_at - INTERVAL 3 DAY")
    run, _ = run_nightly(db_path, land, lenient, as_of=NOW)
    assert len(run.data_quality) == 1
    assert run.data_quality[0].startswith("no new file for 3.0 days (newest loaded ")
    assert run.data_quality[0].endswith(f"UTC; alerts.max_days_without_data is 2) in {land}")
    patient = dataclasses.replace(lenient, alerts=dataclasses.replace(lenient.alerts, max_days_without_data=4))
    assert run_nightly(db_path, land, patient, as_of=NOW + timedelta(hours=1))[0].data_quality == []
