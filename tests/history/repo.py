"""A small real git history with a planted slowdown, recorded with ``pytest-gpuperf history``.

Shared by ``test_asv_history.py`` and ``test_browser.py`` (built once per session).
The recorded values are exact, whatever the machine is doing: the repository's
conftest replaces the CPU backend's block timer by the sum of what the step returns
(its nominal duration), so asv's step detection sees exactly 2 ms, 8 ms and 2 ms.
Everything else (worktrees, pytest per commit, asv results, publishing) is real.

Commits on ``main``, oldest first: ``base`` (2 ms step), ``docs``, ``slow`` (the
planted slowdown: 8 ms), ``docs2``; the history is recorded and published (the
"before" snapshot); then ``revert`` (git revert of ``slow``) is recorded and the
history published again (the "after" snapshot).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

from tests.exact_timing import INSTALL

STEP: Final = "tests_perf.test_step.test_step"
CONTROL: Final = "tests_perf.test_step.test_control"
MACHINE: Final = "testbox"
_KEY = pytest.StashKey["PlantedHistory"]()

_PYTEST_INI: Final = """\
[pytest]
gpuperf_device = cpu
gpuperf_memory = off
gpuperf_max_time = 1
gpuperf_warmup_time = 0.2
gpuperf_target = 2%
# The timer is exact (conftest.py): a few dozen samples say all there is, and asv compare stays fast.
gpuperf_min_time = 0.001
gpuperf_min_samples = 20
"""
_TEST: Final = """\
from slowpkg import step


def test_step(gpuperf):
    gpuperf.measure(step, items=1)


def test_control(gpuperf):
    gpuperf.measure(lambda: 0.002, items=1)
"""
_PACKAGE: Final = """\
DELAY = {delay}


def step():
    return DELAY  # its duration in seconds, as the exact timer of conftest.py counts it
"""


@dataclass
class PlantedHistory:
    repo: Path
    out: Path
    commits: dict[str, str] = field(default_factory=dict)
    before: dict[str, Any] = field(default_factory=dict)  # regressions.json before the revert
    after: dict[str, Any] = field(default_factory=dict)  # and after it
    logs: list[str] = field(default_factory=list)

    def history(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``python -m pytest_gpuperf history <args>`` for this repository, output kept in ``logs``."""
        done = subprocess.run(
            [sys.executable, "-m", "pytest_gpuperf", "history", *args],
            cwd=self.repo,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        self.logs.append(f"$ pytest-gpuperf history {' '.join(args)} -> {done.returncode}\n{done.stdout}{done.stderr}")
        if check and done.returncode != 0:
            raise AssertionError("\n".join(self.logs))
        return done

    def options(self) -> list[str]:
        return ["--out", str(self.out), "--machine", MACHINE, "--tests", "tests_perf"]


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(repo: Path) -> dict[str, str]:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commits = {
        "base": commit(
            repo,
            {
                "pytest.ini": _PYTEST_INI,
                # Each call's duration is what it returns: the planted slowdown is exact, whatever the machine does.
                "conftest.py": INSTALL,
                "slowpkg/__init__.py": _PACKAGE.format(delay=0.002),
                "tests_perf/test_step.py": _TEST,
                "README.md": "a project\n",
            },
            "base",
        ),
        "docs": commit(repo, {"README.md": "a project, documented\n"}, "docs"),
        "slow": commit(repo, {"slowpkg/__init__.py": _PACKAGE.format(delay=0.008)}, "planted slowdown"),
        "docs2": commit(repo, {"README.md": "a project, documented twice\n"}, "docs again"),
    }
    return commits


def regressions(history: PlantedHistory) -> dict[str, Any]:
    html = history.out / "html"
    data: dict[str, Any] = json.loads((html / "regressions.json").read_text())
    index = json.loads((html / "index.json").read_text())
    data["revision_to_hash"] = index["revision_to_hash"]
    return data


def build(tmp: Path) -> PlantedHistory:
    history = PlantedHistory(tmp / "repo", tmp / "asv")
    history.commits = make_repo(history.repo)
    history.history("record", "--last", "4", *history.options())
    history.before = regressions(history)
    history.commits["revert"] = _revert(history.repo, history.commits["slow"])
    history.history("record", "--last", "5", *history.options())
    history.after = regressions(history)
    return history


def _revert(repo: Path, commit: str) -> str:
    git(repo, "revert", "--no-edit", commit)
    return git(repo, "rev-parse", "HEAD")


def planted_history(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PlantedHistory:
    """Build the history once per session; every caller gets the same one."""
    stash = request.config.stash
    if _KEY not in stash:
        stash[_KEY] = build(tmp_path_factory.mktemp("planted"))
    return stash[_KEY]
