"""``pytest-gpuperf history record|publish|offline|regressions``: the history subcommands of the one CLI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import _suites
from .._git import GitError, NotARepository, repo_root, resolve
from .._progress import Progress
from ..gate import DEFAULT_MAX_TIME, DEFAULT_TOLERANCE, DEFAULT_WORKLOADS, add_ab_option
from ..measuring import values
from ._anchored import AnchoredRecipe
from ._assets import OfflineError, default_cache, localize
from ._asv import machine_name
from ._asv_files import AsvError
from ._record import (
    DEFAULT_OUT,
    HistoryError,
    Layout,
    Measures,
    Recipe,
    current_branch,
    exclusive,
    last_commits,
    publish,
    record,
)
from ._regressions import (
    Hunt,
    check_output,
    hunt_regressions,
    lines,
    parse_since,
    report_summary,
    table,
    write_report,
)

__all__ = ["add_parser"]


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--repo", type=values.argtype(values.given_path), default=Path("."), help="the git repository (default: .)"
    )
    common.add_argument(
        "--out",
        type=values.argtype(values.given_path),
        default=None,
        help=f"where results, html and logs go (default: {DEFAULT_OUT} in the repo)",
    )
    common.add_argument(
        "--machine",
        type=values.argtype(values.given_word),
        default=None,
        help="asv machine name (default: this host's name)",
    )
    common.add_argument(
        "--branch",
        type=values.argtype(values.given_word),
        default=None,
        help="branch whose history is shown (default: the current one)",
    )
    return common


def _measuring() -> argparse.ArgumentParser:
    measure = argparse.ArgumentParser(add_help=False)
    measure.add_argument(
        "--tests",
        nargs="+",
        default=None,
        help="test paths to run in each commit (default: suites when the repository has a suites/ folder, each "
        f"commit's own; else the suites installed with pytest-gpuperf, as --pyargs {_suites.PACKAGE})",
    )
    measure.add_argument(
        "--python",
        type=values.argtype(values.given_word),
        default=sys.executable,
        help="the Python that runs pytest (default: this one)",
    )
    measure.add_argument(
        "--install",
        type=values.argtype(values.given_word),
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
    measure.add_argument(
        "--timeout",
        type=values.argtype(values.commit_timeout),
        default=3600.0,
        help="seconds per commit (default: 3600)",
    )
    measure.add_argument("--force", action="store_true", help="measure commits that are already recorded again")
    return measure


def _ab_settings() -> argparse.ArgumentParser:
    """What ``ab`` is told where a history command runs it (``record --anchor``, ``regressions``)."""
    ab = argparse.ArgumentParser(add_help=False)
    ab.add_argument(
        "--workloads",
        type=values.argtype(values.given_path),
        default=None,
        metavar="PATH",
        help=f"the workloads module ab measures (default: {DEFAULT_WORKLOADS})",
    )
    max_time = f"seconds of ab's paired rounds per workload and pair of commits (default: {DEFAULT_MAX_TIME:g})"
    add_ab_option(ab, "--max-time", max_time, unset=True)
    add_ab_option(ab, "--device", "ab's device: cpu, cuda, cuda:N, mps, auto (default: auto)", unset=True)
    return ab


def _publishing() -> argparse.ArgumentParser:
    publishing = argparse.ArgumentParser(add_help=False)
    publishing.add_argument(
        "--offline", action="store_true", help="serve the page's scripts from the page itself (fetched from npm)"
    )
    publishing.add_argument(
        "--asset-cache", type=values.argtype(values.given_path), default=None, help="npm tarball cache for --offline"
    )
    return publishing


def add_parser(commands: Any) -> None:
    """Add ``history`` with its subcommands to the CLI's subparsers."""
    history = commands.add_parser(
        "history", help="record the asv history of a git repository's suites and publish it as graphs"
    )
    sub = history.add_subparsers(dest="history_command", required=True)
    common, measuring, publishing, ab = _common(), _measuring(), _publishing(), _ab_settings()
    rec = sub.add_parser(
        "record",
        parents=[common, measuring, publishing, ab],
        help="record the last N commits (or the given ones), then publish",
    )
    rec.add_argument("commits", nargs="*", help="commits to record instead of --last")
    rec.add_argument(
        "--last",
        type=values.argtype(values.positive_int),
        default=None,
        help="record the last N first-parent commits of the branch",
    )
    rec.add_argument(
        "--anchor",
        type=values.argtype(values.given_word),
        default=None,
        metavar="REV",
        help="record each commit's workloads timed side by side with this commit's (ab's paired rounds): the "
        "history is their time ratios, which the machine's drift between commits does not move "
        "(--workloads, --device, --max-time and -k apply; the tests, --install and --pytest-arg do not)",
    )
    rec.add_argument(
        "-k",
        dest="select",
        action="append",
        default=[],
        metavar="PATTERN",
        help="with --anchor: only workloads whose name contains PATTERN (or matches it, with * ? [), repeatable",
    )
    rec.add_argument("--no-publish", action="store_true", help="record only")
    rec.add_argument("-q", "--quiet", action="store_true", help="no progress lines, only each commit's outcome")
    sub.add_parser("publish", parents=[common, publishing], help="asv publish the recorded history")
    offline = sub.add_parser(
        "offline", help="serve the JavaScript and CSS of a page published by asv from the page itself (no CDN)"
    )
    offline.add_argument("html_dir", type=values.argtype(values.given_path), help="asv's html_dir, after asv publish")
    offline.add_argument(
        "--cache",
        type=values.argtype(values.given_path),
        default=None,
        help=f"tarball cache (default: {default_cache()})",
    )
    _regressions_parser(sub, common, ab)
    history.set_defaults(handler=run)


def _regressions_parser(sub: Any, common: argparse.ArgumentParser, ab: argparse.ArgumentParser) -> None:
    reg = sub.add_parser(
        "regressions",
        parents=[common, ab],
        help="find the steps in the recorded history, confirm each with ab on this machine, bisect it to its commit",
    )
    reg.add_argument(
        "--since",
        type=values.argtype(values.given_word),
        default=None,
        metavar="COMMIT|DATE",
        help="exit 1 only for a confirmed regression newer than this commit or date (a nightly job's last run); "
        "steps older than it are not measured (default: every confirmed regression fails)",
    )
    reg.add_argument(
        "--json", type=values.argtype(values.given_path), default=None, metavar="PATH", help="write the report here"
    )
    reg.add_argument(
        "--workload",
        type=values.argtype(values.given_word),
        default=None,
        metavar="NAME",
        help="confirm every step with this workload (default: the one whose name is in the benchmark's name)",
    )
    reg.add_argument(
        "-k",
        dest="benchmarks",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only benchmarks whose name contains PATTERN (or matches it, with * ? [), repeatable",
    )
    add_ab_option(
        reg, "--tolerance", f"ab's tolerance: slower/faster only beyond it (default: {DEFAULT_TOLERANCE * 100:g}%%)"
    )
    reg.add_argument(
        "--graph-url",
        type=values.argtype(values.given_word),
        default=None,
        metavar="URL",
        help="where the published page is served, for the graph links (default: <out>/html/index.html)",
    )
    reg.add_argument("-q", "--quiet", action="store_true", help="no progress lines: the table and the verdict")


def _layout(args: argparse.Namespace) -> Layout:
    if not args.repo.is_dir():
        raise HistoryError(f"--repo {args.repo}: no such directory; pass --repo the path of the repository's work tree")
    try:
        repo = repo_root(args.repo.resolve())
    except NotARepository as exc:
        raise HistoryError(
            f"{exc}: the history is of a repository's commits; run this in its work tree, or pass --repo PATH"
        ) from None
    out = args.out.resolve() if args.out else repo / DEFAULT_OUT
    try:
        machine = machine_name(args.machine)
    except AsvError as exc:
        raise HistoryError(str(exc)) from None
    return Layout(repo, out, machine)


def _commits(args: argparse.Namespace, layout: Layout, branch: str) -> list[str]:
    if args.commits and args.last is not None:
        raise HistoryError("give commits or --last N, not both")
    if args.commits:
        return [resolve(layout.repo, c) for c in args.commits]
    if args.last is None or args.last < 1:
        raise HistoryError("say which commits: --last N (N >= 1) or a list of commits")
    return last_commits(layout.repo, branch, args.last)


def _offline(args: argparse.Namespace) -> int:
    for note in localize(args.html_dir, args.cache or default_cache()):
        print(f"offline: {note}")
    index, vendor = args.html_dir / "index.html", args.html_dir / "vendor"
    print(f"offline: {index} now loads its scripts from {vendor}, each pinned to its sha256")
    return 0


def _regressions(args: argparse.Namespace, layout: Layout, branch: str) -> int:
    """Exit status: 0 no confirmed regression newer than --since, 1 one or more, 2 bad input."""
    check_output(args.json)
    hunt = Hunt(
        layout,
        branch,
        args.workloads or DEFAULT_WORKLOADS,
        workload=args.workload,
        benchmarks=tuple(args.benchmarks),
        tolerance=args.tolerance,
        max_time=args.max_time or DEFAULT_MAX_TIME,
        device=args.device or "auto",
        since=parse_since(layout.repo, args.since),
        graph_url=args.graph_url or "",
    )
    progress = Progress(None if args.quiet else lambda line: print(line, flush=True), prefix="history regressions")
    report = hunt_regressions(hunt, say=progress.say)
    if report.findings:
        print(table(report))
    for line in lines(report):
        print(line)
    if args.json is not None:
        write_report(report, args.json)
        print(f"history regressions: wrote {args.json}")
    for warning in report_summary(report):
        print(warning, file=sys.stderr)
    return 1 if report.failing else 0


#: What applies to pytest's recording only, and what to ab's (``--anchor``) only: (option, attribute).
_PYTEST_ONLY = (("--tests", "tests"), ("--install", "install"), ("--pytest-arg", "pytest_args"))
_AB_ONLY = (("--workloads", "workloads"), ("--max-time", "max_time"), ("--device", "device"), ("-k", "select"))


def _recipe(args: argparse.Namespace, layout: Layout) -> Measures:
    """pytest's tests in each commit, or (``--anchor``) ab against the anchor; an option of the other kind given
    is refused, since it would be silently ignored."""
    if args.anchor is None:
        given = [option for option, name in _AB_ONLY if getattr(args, name)]
        if given:
            raise HistoryError(
                f"{', '.join(given)} apply to recording with --anchor REV (ab's paired rounds); without it the "
                "tests run under pytest: pass pytest's options with --pytest-arg, --pytest-arg=--gpuperf-max-time=2"
            )
        tests = tuple(args.tests) if args.tests else _suites.default_tests(layout.repo)
        return Recipe(tests, args.python, args.install, tuple(args.pytest_args), args.timeout)
    given = [option for option, name in _PYTEST_ONLY if getattr(args, name)]
    if given:
        raise HistoryError(
            f"{', '.join(given)} apply to pytest's recording, not to --anchor (ab measures the workloads module, "
            "imported from each commit and the anchor): drop them, or choose the workloads with --workloads and -k"
        )
    return AnchoredRecipe(
        resolve(layout.repo, args.anchor),
        args.workloads or DEFAULT_WORKLOADS,
        device=args.device or "auto",
        max_time=args.max_time or DEFAULT_MAX_TIME,
        select=tuple(args.select),
    )


def run(args: argparse.Namespace) -> int:
    """Exit status: 0 done, 1 a commit could not be recorded (regressions: a confirmed regression), 2 bad input."""
    try:
        if args.history_command == "offline":
            return _offline(args)
        layout = _layout(args)
        branch = args.branch or current_branch(layout.repo)
        if args.history_command == "regressions":
            return _regressions(args, layout, branch)
        if args.history_command == "publish":
            with exclusive(layout, "publish"):
                publish(layout, branch, offline=args.offline, cache=args.asset_cache)
            return 0
        recipe = _recipe(args, layout)
        quiet = Progress(None) if args.quiet else None
        commits = _commits(args, layout, branch)
        recipe.check(layout)
        with exclusive(layout, "record"):
            outcomes = record(layout, commits, recipe, force=args.force, progress=quiet)
            if not args.no_publish:
                publish(layout, branch, offline=args.offline, cache=args.asset_cache)
        failed = [o for o in outcomes if "nothing recorded" in o or "install failed" in o]
        return 1 if failed else 0
    except (HistoryError, GitError, OfflineError) as exc:
        print(f"pytest-gpuperf history: error: {exc}", file=sys.stderr)
        return 2
