"""One warehouse handle per run (issue 27, pipeline/warehouse/handle.py): in a whole `pipeline nightly` run on
the bundled sample, every read-write opening of the warehouse file is the run's handle's (no step opens it
itself), the tables are put in place and dead runs settled once, and the writer lock is taken for the run and
taken back only after the run let go of it for alert delivery. The spies wrap the real functions; every
connection is real."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

from conftest import DEMO_AS_OF, ROOT

from pipeline.common import clock
from pipeline.common.config import load_config
from pipeline.jobs.nightly import run_nightly
from pipeline.warehouse import db


def test_a_nightly_run_opens_the_warehouse_only_through_its_handle(tmp_path: Path, monkeypatch):
    landing = tmp_path / "landing"
    shutil.copytree(ROOT / "sample_logs", landing)
    db_path = tmp_path / "telemetry.duckdb"
    openings: list[str] = []  # the module that asked for each read-write opening
    prepared: list[bool] = []
    locks: list[str] = []

    def spy(real, record):
        def wrapper(*args, **kwargs):
            record(inspect.stack()[1].filename, kwargs)
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(db, "connect_write", spy(db.connect_write, lambda f, kw: (
        openings.append(Path(f).name), prepared.append(kw.get("prepare", True)))))
    monkeypatch.setattr(db, "attached", spy(db.attached, lambda f, kw: (
        openings.append(Path(f).name), prepared.append(kw.get("prepare", True)))))
    monkeypatch.setattr(db, "holder_lock", spy(db.holder_lock, lambda f, kw: locks.append(Path(f).name)))

    run, results = run_nightly(db_path, landing, load_config(), as_of=clock.parse(DEMO_AS_OF))

    assert run.status == "ok", run.error
    assert [r.release for r in results] == ["4.11", "4.12"]
    assert openings and set(openings) == {"handle.py"}, openings
    assert prepared.count(True) == 1 and prepared[0] is True
    # the run's lock, then after let_go(): the outbox read, the delivery marks and the run's record
    assert locks == ["db.py"] * 4, locks
    # start, ingest's manifest read and its one batch, the data-quality check, the rollup, two evaluations,
    # the archive step (nothing due), the outbox read, the marks and the run's record
    assert len(openings) == 11, openings
