"""Atomic writes: a killed writer's temporary file is removed by the next write; results follow the umask."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.results import _files
from pytest_gpuperf.results._files import atomic_write_text
from tests.synthetic import make_record, make_run


def dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path: Path) -> None:
    stale = tmp_path / f".run-a.json.gpuperf-{dead_pid()}-x1y2z3w4.tmp"  # what a SIGKILL inside a write leaves
    stale.write_text("{half")
    live = tmp_path / f".run-b.json.gpuperf-{os.getppid()}-k3j4l5m6.tmp"  # another process writing right now
    live.write_text("{")
    foreign = tmp_path / ".editor-swap.tmp"  # not ours: left alone
    foreign.write_text("")
    atomic_write_text(tmp_path / "run-c.json", "{}\n")
    assert not stale.exists()
    assert live.exists() and foreign.exists()
    assert (tmp_path / "run-c.json").read_text() == "{}\n"


def test_results_files_follow_the_umask(tmp_path: Path) -> None:
    before = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.json", "{}")
        assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        atomic_write_text(tmp_path / "b.json", "{}")
        assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(before)


def test_a_folder_is_swept_once_a_process_not_at_every_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: a sweep reads the whole folder, so one at every write made writing a file a test (a session's spool
    of traces, a baseline's) quadratic in the tests. A killed writer's temporary still goes at the first write."""
    swept: list[Path] = []
    real = _files.remove_stale_temporaries

    def sweep(folder: Path) -> list[Path]:
        swept.append(folder)
        return real(folder)

    monkeypatch.setattr(_files, "remove_stale_temporaries", sweep)
    stale = tmp_path / f".run-a.json.gpuperf-{dead_pid()}-x1y2z3w4.tmp"
    stale.write_text("{half")
    for i in range(20):
        atomic_write_text(tmp_path / f"run-{i}.json", "{}\n")
        _files.atomic_export(tmp_path / f"trace-{i}.json", lambda name: Path(name).write_text("{}"), whole=lambda p: "")
    assert swept == [tmp_path] and not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"run-{i}.json" for i in range(20)] + [f"trace-{i}.json" for i in range(20)]
    )


def test_a_run_file_is_one_line_a_record_and_reads_back_the_same(tmp_path: Path) -> None:
    """The C encoder writes each record on a line of its own (Python's indenting encoder took ten times as long)."""
    run = make_run(*[make_record(1e-3 * (i + 1), test=f"tests/t.py::test_{i}") for i in range(3)])
    path = tmp_path / "run.json"
    _files.save_run(path, run)
    text = path.read_text()
    assert json.loads(text) == run.to_dict()
    record_lines = [line for line in text.splitlines() if line.startswith("  {") and line.rstrip(",").endswith("}")]
    assert [json.loads(line.rstrip(","))["test"] for line in record_lines] == [
        f"tests/t.py::test_{i}" for i in range(3)
    ]
    assert _files.load_run(path).to_dict() == run.to_dict()
    _files.save_baseline_file(tmp_path / "main.json", "main", [run, run])
    assert [r.to_dict() for r in _files.load_runs(tmp_path / "main.json")] == [run.to_dict()] * 2
