"""Untrusted Parquet read in isolated workers (pipeline/ingest/isolated.py): a reader that aborts, segfaults, hangs
or allocates without bound rejects its own file with what happened; the run, and every other file, go on."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from conftest import NOW, ROOT, counts, run_cli, valid_table, write

from pipeline.ingest import isolated
from pipeline.ingest.isolated import BYTES_PER_WORKER, ReaderLimits, workers_for
from pipeline.ingest.run import ingest

FAULTS = {
    "abort.parquet": "reader crashed (SIGABRT)",
    "segv.parquet": "reader crashed (SIGSEGV)",
    "hang.parquet": "reader exceeded 3 s",
    "arrow_hog.parquet": "reader exceeded 1 GB",
    "python_hog.parquet": "reader exceeded 1 GB",
}


def faulty_landing(tmp_path: Path) -> Path:
    land = tmp_path / "land"
    for seed, name in enumerate(["good_a.parquet", *FAULTS, "good_b.parquet"], start=70):
        write(valid_table(200, seed=seed), land / name)
    return land


def hooked(monkeypatch, tmp_path: Path) -> Path:
    log = tmp_path / "read.log"
    monkeypatch.setenv("PIPELINE_READER_HOOK", f"{ROOT / 'tests' / 'reader_faults.py'}:inject")
    monkeypatch.setenv("READER_FAULTS_LOG", str(log))
    return log


def test_each_reader_fault_rejects_its_file_and_the_others_load(monkeypatch, tmp_path, db_path):
    hooked(monkeypatch, tmp_path)
    result = ingest(db_path, [faulty_landing(tmp_path)], now=NOW, reader=ReaderLimits(seconds=3, memory_mb=1024))

    by_name = {Path(f.path).name: f for f in result.files}
    assert {n: f.reason for n, f in by_name.items() if f.status == "rejected"} == FAULTS
    assert {n for n, f in by_name.items() if f.status == "loaded"} == {"good_a.parquet", "good_b.parquet"}
    c = counts(db_path)
    assert (c["events"], c["files_loaded"]) == (400, 2)


def test_a_nightly_with_crashing_readers_ends_ok_names_them_and_does_not_read_them_again(monkeypatch, tmp_path,
                                                                                        db_path):
    """Through the real CLI: the process is never killed by a signal; the data-quality alarm (exit 4) names the
    rejected files; the second nightly reads none of them (their sha256 is on record) and counts the same."""
    log = hooked(monkeypatch, tmp_path)
    land = faulty_landing(tmp_path)
    args = ["nightly", "--db", str(db_path), "--landing", str(land), "--as-of", NOW.isoformat(), "--json",
            "--reader-timeout", "3", "--reader-memory", "1024"]

    first = run_cli(*args)
    assert first.returncode == 4, first.stderr  # a data-quality problem; never -6 or -11
    run = json.loads(first.stdout)
    assert run["status"] == "ok"
    assert run["data_quality"][0].startswith("5 of 7 files rejected: ")
    assert counts(db_path)["events"] == 400
    assert sorted(log.read_text().split()) == sorted(["good_a.parquet", "good_b.parquet", *FAULTS])

    log.unlink()
    second = run_cli(*args)
    assert second.returncode == 4, second.stderr
    again = json.loads(second.stdout)
    assert again["steps"]["ingest"]["rows_read"] == 0
    assert not log.exists()  # no file was read again
    assert counts(db_path)["events"] == 400



def test_a_second_reader_starts_only_for_enough_bytes_to_pay_for_it(tmp_path):
    small = [tmp_path / f"s{i}.parquet" for i in range(5)]
    for i, path in enumerate(small):
        write(valid_table(50, seed=i), path)
    big = [tmp_path / f"b{i}.parquet" for i in range(3)]
    for path in big:  # sparse: their size is what counts, not their bytes on disk
        with path.open("wb") as fh:
            fh.truncate(BYTES_PER_WORKER)
    two = ReaderLimits(workers=2)
    assert workers_for(small, two) == 1  # five small files: one process started, not two
    assert workers_for(big[:1], two) == 1  # one file is never read by two
    assert workers_for(big, two) == 2
    assert workers_for(big, ReaderLimits(workers=1)) == 1
    assert workers_for([tmp_path / "gone.parquet", *small], two) == 1  # a vanished file counts nothing


def test_a_process_reuses_its_idle_reader_and_never_a_dead_one(tmp_path, db_path):
    isolated._end_parked()  # none kept from an earlier test of this process
    files = []
    for i in range(3):
        files.append(tmp_path / "land" / f"f{i}.parquet")
        write(valid_table(100, seed=80 + i), files[-1])
    first = ingest(db_path, [files[0].parent], now=NOW)
    assert [r.status for r in first.files] == ["loaded"] * 3
    (parked,) = isolated._parked  # one reader read the three small files, and waits for the next run
    pid = parked._proc.pid
    write(valid_table(100, seed=90), tmp_path / "more" / "g.parquet")
    assert [r.status for r in ingest(db_path, [tmp_path / "more"], now=NOW).files] == ["loaded"]
    assert [w._proc.pid for w in isolated._parked] == [pid]  # the same process read it
    os.kill(pid, signal.SIGKILL)  # a parked reader that died (the OOM killer, say) is not handed a file
    isolated._parked[0]._proc.wait()
    write(valid_table(100, seed=91), tmp_path / "last" / "h.parquet")
    assert [r.status for r in ingest(db_path, [tmp_path / "last"], now=NOW).files] == ["loaded"]
    assert [w._proc.pid for w in isolated._parked] != [pid]
    assert counts(db_path)["events"] == 500


def test_a_reader_with_a_hook_is_not_kept(monkeypatch, tmp_path, db_path):
    hooked(monkeypatch, tmp_path)
    write(valid_table(100, seed=92), tmp_path / "land" / "good_a.parquet")
    assert [r.status for r in ingest(db_path, [tmp_path / "land"], now=NOW).files] == ["loaded"]
    assert isolated._parked == []  # the hook reads its environment, which the next run may change
