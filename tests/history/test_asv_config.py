"""The asv.conf.json that ``history publish`` writes (issue 24 item 6): the real ``asv check`` accepts it, and its
paths are relative to it, so that the history folder can be moved whole."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.history._record import Layout, write_config

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a repository")


def _asv_check(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "asv", "check", "--config", str(config)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, cwd=cwd)


def test_asv_check_accepts_the_config_publish_writes(tmp_path: Path) -> None:
    """On main ``asv check`` exited 1 (``No __init__.py file in '<repo>/benchmarks'``: a folder that did not exist),
    and the config held absolute paths."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    layout = Layout(repo, repo / ".asv" / "pytest", "box")
    layout.results.mkdir(parents=True)
    listed = '{"version": 2, "test_m.test_step": {"name": "test_m.test_step"}}\n'
    (layout.results / "benchmarks.json").write_text(listed)

    config = write_config(layout, "main")
    written = json.loads(config.read_text())
    assert {key: written[key] for key in ("repo", "benchmark_dir", "results_dir", "html_dir")} == {
        "repo": "../..",
        "benchmark_dir": "benchmarks",
        "results_dir": "results",
        "html_dir": "html",
    }
    for cwd in (repo, tmp_path):  # asv reads the paths from the config's folder, wherever it is started
        done = _asv_check(config.relative_to(cwd), cwd)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "No problems found" in done.stdout
    assert (layout.results / "benchmarks.json").read_text() == listed  # asv check left the pytest benchmarks alone

    moved = tmp_path / "moved"
    shutil.move(repo, moved)  # the repository with its history folder inside: the relative paths still hold
    done = _asv_check(moved / ".asv" / "pytest" / "asv.conf.json", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
