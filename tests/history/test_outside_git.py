"""``history record`` and ``publish`` outside a git repository: one line naming the path and the fix, exit 2.

Issue 23 item 10: it printed git's own words (``git rev-parse ... failed: fatal: not a git repository``), and a
``--repo`` that does not exist said "cannot run git ...; install git".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.cli import main


@pytest.mark.parametrize("command", ["record", "publish"])
def test_outside_git_one_line_with_the_path_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above the test's folder counts
    monkeypatch.chdir(tmp_path)
    assert main(["history", command, *(["--last", "1"] if command == "record" else [])]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"pytest-gpuperf history: error: {tmp_path} is not in a git repository (no .git in it or above it): "
        "the history is of a repository's commits; run this in its work tree, or pass --repo PATH\n"
    )
    assert "fatal" not in captured.err and "rev-parse" not in captured.err


def test_a_repo_that_does_not_exist_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "record", "--last", "1", "--repo", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"pytest-gpuperf history: error: --repo {tmp_path / 'nope'}: no such directory; "
        "pass --repo the path of the repository's work tree\n"
    )
