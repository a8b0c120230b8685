"""``pytest-gpuperf``: one command line with the gate's and the history's subcommands; bad input exits 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["compare"],
        ["ab"],
        ["history"],
        ["history", "record"],
        ["history", "publish"],
        ["history", "offline"],
        ["export"],
        ["runs"],
        ["runs", "show"],
        ["runs", "prune"],
    ],
)
def test_every_subcommand_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    assert "usage: pytest-gpuperf" in capsys.readouterr().out


def test_a_subcommand_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2 and "required: command" in capsys.readouterr().err


def test_offline_assets_for_a_page_that_was_not_published(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "offline", str(tmp_path), "--cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'index.html'} does not exist; run `asv publish` first" in err


def test_python_dash_m_is_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "{compare,ab,history,export,runs,report}" in done.stdout


def test_an_interrupted_command_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_gpuperf.gate import _commands

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(_commands, "compare_command", interrupted)
    assert main(["compare", "a", "b"]) == 130
    assert capsys.readouterr().err == "pytest-gpuperf compare: interrupted; nothing was judged\n"
