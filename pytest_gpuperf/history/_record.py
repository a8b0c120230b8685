"""Record the asv history of a git repository with pytest-gpuperf, and publish it.

One command records the last N commits of a branch and publishes the graphs::

    pytest-gpuperf history record --last 5

For each commit not recorded yet: a detached ``git worktree`` of it, an optional
install command, ``pytest <tests> --gpuperf-asv=<out>/results`` run in it, the
worktree removed. The measuring plugin is the one installed where this command
runs, for every commit, so that old and new commits are measured the same way;
the tests and the code they import come from each commit's worktree. Then
``asv publish`` writes ``<out>/html`` (``--offline`` also serves its scripts from
there, see ``_assets.py``).

Layout of ``--out`` (default ``.asv/pytest`` in the repository)::

    results/     asv results (what --gpuperf-asv writes)
    html/        the published site (index.html, regressions.json ...)
    logs/        pytest output per commit
    benchmarks/  an empty package: asv's benchmark_dir must exist (the benchmarks are pytest's)
    asv.conf.json  written by this command (paths relative to it), so that plain asv works too:
                   asv --config .asv/pytest/asv.conf.json compare main HEAD

History is for looking back; to gate a pull request use ``pytest-gpuperf ab`` (the
gate with measured power; ``docs/gating.md`` says which route to use where).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from .._git import git, worktree
from .._progress import Progress
from ..measuring import clipped
from ..results import LockHeld, ResultsError, locked
from ._assets import OfflineError, default_cache, localize
from ._asv_files import ANCHORED, AsvError, read_results

__all__ = [
    "DEFAULT_OUT",
    "HistoryError",
    "Layout",
    "Measures",
    "Recipe",
    "current_branch",
    "exclusive",
    "last_commits",
    "publish",
    "record",
]

DEFAULT_OUT: Final = ".asv/pytest"
#: pytest without the worktree first on sys.path (what ``python -m`` would do), so the measuring
#: plugin stays the installed one even when the repository is pytest-gpuperf itself.
_PYTEST_WITHOUT_CWD: Final = "import sys; del sys.path[0]; import pytest; raise SystemExit(pytest.main())"


class HistoryError(Exception):
    """A history command that cannot go on; the message names the input and the fix."""


@dataclass(frozen=True)
class Layout:
    """Where one history lives."""

    repo: Path
    out: Path
    machine: str

    @property
    def results(self) -> Path:
        return self.out / "results"

    @property
    def html(self) -> Path:
        return self.out / "html"

    @property
    def logs(self) -> Path:
        return self.out / "logs"

    @property
    def config(self) -> Path:
        return self.out / "asv.conf.json"

    def recorded(self, commit: str, anchor: str | None = None) -> bool:
        """Whether ``commit`` has results on this machine: its tests' or, given an ``anchor`` (a commit hash), its
        ratios against that anchor (``_anchored.py``: benchmarks named ``ANCHORED<anchor[:8]>.<workload>``). A file
        that cannot be read counts as recorded: the commands that read it report it, and none overwrites it."""
        prefix = ANCHORED if anchor is None else f"{ANCHORED}{anchor[:8]}."
        for path in (self.results / self.machine).glob(f"{commit[:8]}-*.json"):
            try:
                rows = read_results(path).get("results") or {}
            except AsvError:
                return True
            if any(str(name).startswith(prefix) == (anchor is not None) for name in rows):
                return True
        return False


@contextlib.contextmanager
def exclusive(layout: Layout, command: str) -> Iterator[None]:
    """Hold the output folder for one whole record and publish, or refuse at once, naming who holds it.

    Two history commands on one folder would measure the same commits on the same cores at
    once (each disturbing the other's figures) and race in ``asv publish``. The lock is
    ``results.locked`` on ``<out>/history.lock`` without waiting (a wait could be hours); the
    kernel drops it when its holder dies, so a killed run never blocks the next.
    """
    layout.out.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    holder = f"pid {os.getpid()} on {socket.gethostname()}: pytest-gpuperf history {command}, since {when}"
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(locked(layout.out / "history", timeout=0, holder=holder))
        except LockHeld as exc:
            raise HistoryError(
                f"{layout.out} is in use by another history command ({exc.holder or 'holder unknown'}): two at "
                f"once would measure on the same cores and race in asv publish; wait for it to end, or give "
                f"this one another --out"
            ) from None
        except ResultsError as exc:
            raise HistoryError(str(exc)) from None
        yield


# ---------------------------------------------------------------- git


def current_branch(repo: Path) -> str:
    branch = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    if branch == "HEAD":
        raise HistoryError(f"{repo} is on a detached HEAD; name the branch whose history to publish with --branch")
    return branch


def last_commits(repo: Path, branch: str, count: int) -> list[str]:
    """The last ``count`` first-parent commits of ``branch``, oldest first."""
    return list(reversed(git(repo, "rev-list", "--first-parent", f"-n{count}", branch).split()))


# ---------------------------------------------------------------- recording


class Measures(Protocol):
    """How ``record`` measures a commit: pytest's tests (``Recipe``), or ab against an anchor (``_anchored.py``)."""

    def check(self, layout: Layout) -> None:
        """Raise HistoryError for what can be found wrong before any commit is measured."""

    def recorded(self, layout: Layout, commit: str) -> bool:
        """Whether ``commit`` has this recipe's results already."""

    def measure(self, layout: Layout, commit: str) -> str:
        """Measure and write ``commit``; a one-line outcome (``nothing recorded ...`` when nothing was)."""


@dataclass(frozen=True)
class Recipe:
    """How to measure one commit: its tests, run by pytest in a worktree of the commit."""

    tests: tuple[str, ...]
    python: str
    install: str | None
    pytest_args: tuple[str, ...]
    timeout: float

    def check(self, layout: Layout) -> None:
        """Nothing to check before measuring: each commit's pytest reports its own problems, in its log."""

    def recorded(self, layout: Layout, commit: str) -> bool:
        return layout.recorded(commit)

    def measure(self, layout: Layout, commit: str) -> str:
        return record_commit(layout, commit, self)


def record_commit(layout: Layout, commit: str, recipe: Recipe) -> str:
    """Measure ``commit`` in a worktree of its own; return a one-line outcome."""
    layout.logs.mkdir(parents=True, exist_ok=True)
    log = layout.logs / f"{commit[:8]}.log"
    with worktree(layout.repo, commit) as tree, log.open("w", encoding="utf-8") as out:
        if recipe.install:
            command = recipe.install.format(python=shlex.quote(recipe.python))
            out.write(f"$ {command}\n")
            out.flush()
            done = _run(command, tree, out, recipe.timeout, shell=True)
            if done != 0:
                return f"install failed (exit {done}); see {log}"
        argv = [
            recipe.python,
            "-c",
            _PYTEST_WITHOUT_CWD,
            *recipe.tests,
            f"--gpuperf-asv={layout.results.resolve()}",
            f"--gpuperf-asv-machine={layout.machine}",
            "-p",
            "no:cacheprovider",
            *recipe.pytest_args,
        ]
        out.write(f"$ {shlex.join(argv)}\n")
        out.flush()
        code = _run(argv, tree, out, recipe.timeout)
    if layout.recorded(commit):
        return "recorded" + (f" (pytest exit {code}: some tests failed; see {log})" if code else "")
    if code == 5:
        return f"nothing to record: no tests collected; see {log}"
    return f"nothing recorded (pytest exit {code}); see {log}"


def _run(command: str | list[str], cwd: Path, out: Any, timeout: float, *, shell: bool = False) -> int:
    try:
        return subprocess.run(
            command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, shell=shell, check=False
        ).returncode
    except subprocess.TimeoutExpired:
        out.write(f"\ngpuperf: timed out after {timeout:g} s\n")
        return -1


def record(
    layout: Layout, commits: Sequence[str], recipe: Measures, *, force: bool = False, progress: Progress | None = None
) -> list[str]:
    """Record each commit not recorded yet (all of them with ``force``); print and return the outcomes.

    ``progress`` says which commit is being measured (default: a line on standard output each).
    """
    progress = progress or Progress(lambda line: print(line, flush=True), prefix="history")
    outcomes = []
    for number, commit in enumerate(commits, 1):
        subject = git(layout.repo, "show", "-s", "--format=%s", commit)
        if recipe.recorded(layout, commit) and not force:
            outcome = "already recorded"
        else:
            progress.step(f"measuring {commit[:8]} {clipped(subject, 60)}", number, len(commits), "commit")
            outcome = recipe.measure(layout, commit)
        line = f"{commit[:8]} {clipped(subject, 60)}: {outcome}"
        print(line, flush=True)
        outcomes.append(line)
    return outcomes


# ---------------------------------------------------------------- asv


#: What ``write_config`` puts in the ``benchmarks`` folder asv's config must name (``benchmark_dir``).
_BENCHMARKS_README: Final = (
    '"""asv needs its benchmark_dir to exist, as a package, for `asv check` and the commands that discover\n'
    "benchmarks. This history's benchmarks are pytest tests, recorded by pytest-gpuperf into results/ (its\n"
    'benchmarks.json lists them): this folder holds none, and `asv check --config asv.conf.json` finds no problem."""\n'
)


def write_config(layout: Layout, branch: str) -> Path:
    """An asv.conf.json for this history, so that asv's own commands read it (``asv --config <out>/asv.conf.json
    compare``, ``asv check``).

    Its paths are relative to the config's folder, which asv changes into before reading them, so that the
    history can be moved or archived whole; the repository is absolute only where no relative path reaches it (on
    another drive). ``benchmark_dir`` is ``<out>/benchmarks``, made here with an ``__init__.py`` that says why it
    is empty: asv refuses a config whose ``benchmark_dir`` does not exist (``asv check`` exited 1).
    """
    layout.out.mkdir(parents=True, exist_ok=True)
    out = layout.out.resolve()
    try:
        repo = os.path.relpath(layout.repo.resolve(), out)
    except ValueError:  # another drive (Windows): no relative path
        repo = str(layout.repo.resolve())
    config = {
        "version": 1,
        "project": layout.repo.resolve().name,
        "project_url": "",
        "repo": repo,
        "branches": [branch],
        "environment_type": "existing",
        "pythons": ["same"],
        "benchmark_dir": "benchmarks",
        "results_dir": os.path.relpath(layout.results.resolve(), out),
        "html_dir": os.path.relpath(layout.html.resolve(), out),
    }
    package = layout.out / "benchmarks" / "__init__.py"
    if not package.exists():
        package.parent.mkdir(exist_ok=True)
        package.write_text(_BENCHMARKS_README, encoding="utf-8")
    layout.config.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")
    return layout.config


def publish(layout: Layout, branch: str, *, offline: bool, cache: Path | None) -> None:
    config = write_config(layout, branch)
    if not (layout.results / "benchmarks.json").exists():
        raise HistoryError(f"nothing to publish: {layout.results} has no results; run the record command first")
    done = subprocess.run([sys.executable, "-m", "asv", "--config", str(config), "publish"], check=False)
    if done.returncode != 0:
        raise HistoryError(f"asv publish failed (exit {done.returncode}); see its output above")
    if offline:
        try:
            for note in localize(layout.html, cache or default_cache()):
                print(f"offline: {note}")
        except OfflineError as exc:
            raise HistoryError(str(exc)) from None
    print(
        f"published {layout.html / 'index.html'}; view it with: python -m http.server --bind 127.0.0.1 -d {layout.html}"
    )
