"""The one git runner's worktrees: removed at the end, and after a SIGKILL by the next run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_gpuperf._git import OWNER_FILE, worktree
from tests.history.repo import commit, git


def dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_a_killed_runs_worktree_is_removed_by_the_next_run(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    head = commit(repo, {"a.txt": "a"}, "first")
    # What a SIGKILLed run leaves: its scratch directory, with a registered worktree, owned by a dead process.
    stale = Path(tempfile.mkdtemp(prefix="gpuperf-test-"))
    (stale / OWNER_FILE).write_text(str(dead_pid()))
    git(repo, "worktree", "add", "--detach", "--quiet", str(stale / "tree"), head)
    live = Path(tempfile.mkdtemp(prefix="gpuperf-test-"))  # another run's, still running: kept
    (live / OWNER_FILE).write_text(str(os.getppid()))
    try:
        with worktree(repo, head, prefix="gpuperf-test-") as tree:
            assert (tree / "a.txt").read_text() == "a"
            assert not stale.exists()
            assert live.exists()
        assert str(stale) not in git(repo, "worktree", "list", "--porcelain")
        assert not tree.parent.exists()
    finally:
        shutil.rmtree(live, ignore_errors=True)
