"""Atomic writes: a killed writer's temporary file is removed by the next write; results follow the umask."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pytest_gpuperf.results._files import atomic_write_text


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
