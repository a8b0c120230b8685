"""``history record`` says which commit it measures, of how many; ``-q`` leaves only each commit's outcome."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from tests.history.repo import commit, git


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A repository of two commits, cwd; returns their hashes, oldest first."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    monkeypatch.chdir(root)
    return [commit(root, {"README.md": "a\n"}, "first"), commit(root, {"README.md": "b\n"}, "second")]


def record(tmp_path: Path, last: int, *more: str) -> int:
    """No such test path: each commit's pytest exits at once with nothing recorded, and the command exits 1."""
    out = str(tmp_path / "asv")
    args = ["--no-publish", "--out", out, "--machine", "m", "--tests", "no_such_tests", *more]
    return main(["history", "record", "--last", str(last), *args])


@pytest.mark.e2e  # history record, end to end: a pytest process per commit
def test_record_says_which_commit_it_measures(
    repo: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = (c[:8] for c in repo)
    assert record(tmp_path, 2) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"history: measuring {first} first (commit 1 of 2)"
    assert lines[1].startswith(f"{first} first: nothing recorded (pytest exit 4)")
    assert re.fullmatch(rf"history: measuring {second} second \(commit 2 of 2, [0-9.]+ s\)", lines[2])
    assert lines[3].startswith(f"{second} second: nothing recorded")


@pytest.mark.e2e  # history record, end to end: a pytest process per commit
def test_quiet_leaves_only_the_outcomes(repo: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert record(tmp_path, 1, "-q") == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{repo[1][:8]} second: nothing recorded (pytest exit 4)")
