"""Record the asv history of a git repository with pytest-gpuperf, publish it, and gate a pull request on it.

One command records the last N commits of a branch and publishes the graphs::

    python -m pytest_gpuperf.asv_history record --last 5

For each commit not recorded yet: a detached ``git worktree`` of it, an optional
install command, ``pytest <tests> --gpuperf-asv=<out>/results`` run in it, the
worktree removed. The measuring plugin is the one installed where this command
runs, for every commit, so that old and new commits are measured the same way;
the tests and the code they import come from each commit's worktree. Then
``asv publish`` writes ``<out>/html`` (``--offline`` also serves its scripts from
there, see ``asv_offline``).

Layout of ``--out`` (default ``.asv/pytest`` in the repository)::

    results/     asv results (what --gpuperf-asv writes)
    html/        the published site (index.html, regressions.json ...)
    logs/        pytest output per commit
    asv.conf.json  written by this command, so that plain asv works too:
                   asv --config .asv/pytest/asv.conf.json compare main HEAD

Gate a pull request: ``gate BASE HEAD`` records both commits when missing and
prints asv's comparison; it exits 1 when a benchmark got significantly slower by
more than ``--factor`` (asv's rule: significance first, then the ratio).
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .asv import AsvError, check_machine_name
from .gitrepo import GitError, git, repo_root, resolve, worktree

__all__ = ["HistoryError", "Layout", "main", "record", "write_config"]

DEFAULT_OUT: Final = ".asv/pytest"
#: pytest without the worktree first on sys.path (what ``python -m`` would do), so the measuring
#: plugin stays the installed one even when the repository is pytest-gpuperf itself.
_PYTEST_WITHOUT_CWD: Final = "import sys; del sys.path[0]; import pytest; raise SystemExit(pytest.console_main())"


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

    def recorded(self, commit: str) -> bool:
        return any((self.results / self.machine).glob(f"{commit[:8]}-*.json"))


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


@dataclass(frozen=True)
class Recipe:
    """How to measure one commit."""

    tests: tuple[str, ...]
    python: str
    install: str | None
    pytest_args: tuple[str, ...]
    timeout: float


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


def record(layout: Layout, commits: Sequence[str], recipe: Recipe, *, force: bool = False) -> list[str]:
    """Record each commit not recorded yet (all of them with ``force``); print and return the outcomes."""
    outcomes = []
    for commit in commits:
        subject = git(layout.repo, "show", "-s", "--format=%s", commit)
        if layout.recorded(commit) and not force:
            outcome = "already recorded"
        else:
            print(f"{commit[:8]} {subject[:60]}: measuring ...", flush=True)
            outcome = record_commit(layout, commit, recipe)
        line = f"{commit[:8]} {subject[:60]}: {outcome}"
        print(line, flush=True)
        outcomes.append(line)
    return outcomes


# ---------------------------------------------------------------- asv


def write_config(layout: Layout, branch: str) -> Path:
    """An asv.conf.json for this history (absolute paths), so that asv's own commands read it."""
    config = {
        "version": 1,
        "project": layout.repo.name,
        "project_url": "",
        "repo": str(layout.repo),
        "branches": [branch],
        "environment_type": "existing",
        "pythons": ["same"],
        "benchmark_dir": str(layout.repo / "benchmarks"),
        "results_dir": str(layout.results.resolve()),
        "html_dir": str(layout.html.resolve()),
    }
    layout.out.mkdir(parents=True, exist_ok=True)
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
        from .asv_offline import OfflineError, default_cache, localize

        try:
            for note in localize(layout.html, cache or default_cache()):
                print(f"asv_offline: {note}")
        except OfflineError as exc:
            raise HistoryError(str(exc)) from None
    print(f"published {layout.html / 'index.html'}; view it with: python -m http.server -d {layout.html}")


def compare(layout: Layout, branch: str, base: str, head: str, factor: float) -> bool:
    """asv's comparison table of two recorded commits; True when a benchmark got worse (asv's own rule)."""
    try:
        from asv.commands.compare import Compare
        from asv.config import Config
        from asv.util import UserError
    except ImportError:
        raise HistoryError("the gate uses asv: pip install asv (or pytest-gpuperf[asv])") from None
    conf = Config.load(str(write_config(layout, branch)))
    try:
        worsened, _ = Compare.print_table(
            conf,
            base,
            head,
            factor=factor,
            split=False,
            machine=layout.machine,
            only_changed=False,
            sort="default",
            commit_names={base: base[:8], head: head[:8]},
        )
    except UserError as exc:
        raise HistoryError(f"asv compare {base[:8]} {head[:8]}: {exc}") from None
    return bool(worsened)


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gpuperf.asv_history",
        description="Record the history of a git repository's pytest-gpuperf suites as asv results, "
        "publish it as graphs, and gate a pull request on it.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default: .)")
    common.add_argument(
        "--out", type=Path, default=None, help=f"where results, html and logs go (default: {DEFAULT_OUT} in the repo)"
    )
    common.add_argument("--machine", default=None, help="asv machine name (default: this host's name)")
    common.add_argument("--branch", default=None, help="branch whose history is shown (default: the current one)")
    measure = argparse.ArgumentParser(add_help=False)
    measure.add_argument(
        "--tests", nargs="+", default=["suites"], help="test paths to run in each commit (default: suites)"
    )
    measure.add_argument("--python", default=sys.executable, help="the Python that runs pytest (default: this one)")
    measure.add_argument(
        "--install",
        default=None,
        help="shell command run in each commit's worktree before measuring, {python} is the --python, "
        "for example '{python} -m pip install --no-deps -e .' for a package that needs building",
    )
    measure.add_argument(
        "--pytest-arg",
        dest="pytest_args",
        action="append",
        default=[],
        help="extra pytest argument, repeatable, for example --pytest-arg=--gpuperf-max-time=2",
    )
    measure.add_argument("--timeout", type=float, default=3600.0, help="seconds per commit (default: 3600)")
    measure.add_argument("--force", action="store_true", help="measure commits that are already recorded again")
    publishing = argparse.ArgumentParser(add_help=False)
    publishing.add_argument(
        "--offline", action="store_true", help="serve the page's scripts from the page itself (fetched from npm)"
    )
    publishing.add_argument("--asset-cache", type=Path, default=None, help="npm tarball cache for --offline")
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser(
        "record", parents=[common, measure, publishing], help="record the last N commits (or the given ones), publish"
    )
    rec.add_argument("commits", nargs="*", help="commits to record instead of --last")
    rec.add_argument("--last", type=int, default=None, help="record the last N first-parent commits of the branch")
    rec.add_argument("--no-publish", action="store_true", help="record only")
    sub.add_parser("publish", parents=[common, publishing], help="asv publish the recorded history")
    gate = sub.add_parser(
        "gate", parents=[common, measure], help="compare two commits; exit 1 when a benchmark got slower"
    )
    gate.add_argument("base", help="the reference commit, for example main")
    gate.add_argument("head", help="the commit under review, for example HEAD")
    gate.add_argument("--factor", type=float, default=1.1, help="slower by more than this ratio fails (default: 1.1)")
    return parser


def _layout(args: argparse.Namespace) -> Layout:
    repo = repo_root(args.repo.resolve())
    out = args.out.resolve() if args.out else repo / DEFAULT_OUT
    try:
        machine = check_machine_name(args.machine or platform.node() or "localhost")
    except AsvError as exc:
        raise HistoryError(str(exc)) from None
    return Layout(repo, out, machine)


def _recipe(args: argparse.Namespace) -> Recipe:
    return Recipe(tuple(args.tests), args.python, args.install, tuple(args.pytest_args), args.timeout)


def _commits(args: argparse.Namespace, layout: Layout, branch: str) -> list[str]:
    if args.commits and args.last is not None:
        raise HistoryError("give commits or --last N, not both")
    if args.commits:
        return [resolve(layout.repo, c) for c in args.commits]
    if args.last is None or args.last < 1:
        raise HistoryError("say which commits: --last N (N >= 1) or a list of commits")
    return last_commits(layout.repo, branch, args.last)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        layout = _layout(args)
        branch = args.branch or current_branch(layout.repo)
        if args.command == "record":
            outcomes = record(layout, _commits(args, layout, branch), _recipe(args), force=args.force)
            if not args.no_publish:
                publish(layout, branch, offline=args.offline, cache=args.asset_cache)
            failed = [o for o in outcomes if "nothing recorded" in o or "install failed" in o]
            return 1 if failed else 0
        if args.command == "publish":
            publish(layout, branch, offline=args.offline, cache=args.asset_cache)
            return 0
        base, head = resolve(layout.repo, args.base), resolve(layout.repo, args.head)
        record(layout, [base, head], _recipe(args), force=args.force)
        worse = compare(layout, branch, base, head, args.factor)
        print(
            f"gate: {'FAIL: a benchmark got significantly slower' if worse else 'pass: nothing significantly slower'}"
            f" ({head[:8]} against {base[:8]}, factor {args.factor:g})"
        )
        return 1 if worse else 0
    except (HistoryError, GitError) as exc:
        print(f"asv_history: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
