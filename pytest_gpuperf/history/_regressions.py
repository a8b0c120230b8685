"""``pytest-gpuperf history regressions``: the history's steps, confirmed by ``ab``, bisected to their culprits.

1. **Candidates.** The recorded asv results (``history record``), per benchmark, device and
   machine, in the branch's first-parent order; their change points (``_changes.py``).
2. **Which workload.** ``ab`` measures the workloads module, not the tests: a benchmark is
   confirmed with the workload whose name it contains (the longest, ``suites.test_mlp.
   test_mlp_train_mlp_train`` -> ``mlp_train``), or with ``--workload NAME`` for all of them.
3. **Confirmed and bisected** (``_bisect.py``): each candidate step by ``ab`` pairs measured here,
   in this process (the gate's own ``run``).
4. **Report.** The table (and ``$GITHUB_STEP_SUMMARY``'s), the JSON (``--json``), each row linked to its
   asv graph; the exit status is 1 when a confirmed regression's culprit is newer than ``--since``
   (every confirmed regression without it).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from tabulate import tabulate

from .._git import GitError, commit_time, git, resolve
from ..gate import (
    DEFAULT_MAX_TIME,
    DEFAULT_TOLERANCE,
    AbError,
    AbOptions,
    append_summary,
    run_ab,
    select_names,
    workload_names,
)
from ..measuring import DeviceError, clipped, counted, open_device, values
from ..results import OutputKind, ResultsError, atomic_write_text, output_problem
from ._bisect import Culprit, Pair, Probe, Span, hunt_span
from ._changes import (
    DEFAULT_RULE,
    Change,
    ChangeRule,
    Series,
    SeriesKey,
    changes_of,
    commit_order,
    history_series,
    why_no_change,
)
from ._record import HistoryError, Layout, exclusive

__all__ = [
    "SCHEMA",
    "Hunt",
    "Report",
    "Since",
    "hunt_regressions",
    "match_workload",
    "parse_since",
    "table",
    "write_report",
]

SCHEMA: Final = "pytest-gpuperf/regressions"
SCHEMA_VERSION: Final = 1


#: ``history regressions --json``: replaces only a report of ours.
REGRESSIONS_OUTPUT: Final = OutputKind.of_schema("regressions report", "regressions.json", SCHEMA)


@dataclass(frozen=True)
class Since:
    """``--since``: a commit (newer: not one of its ancestors) or a date (newer: committed after it)."""

    given: str
    commit: str = ""
    date: dt.datetime | None = None

    def newer(self, repo: Path, commit: str) -> bool:
        if self.commit:
            try:
                git(repo, "merge-base", "--is-ancestor", commit, self.commit)
            except GitError:
                return True
            return False
        assert self.date is not None
        return commit_time(repo, commit) > self.date.timestamp()


def parse_since(repo: Path, given: str | None) -> Since | None:
    """``--since``: an ISO date (``2026-11-20``, ``2026-11-20T03:00:00+00:00``; UTC when no zone) or a commit."""
    if not given:
        return None
    try:  # a commit first: a hash of digits alone would read as a date (20261120)
        return Since(given, commit=resolve(repo, given))
    except GitError:
        pass
    try:
        date = dt.datetime.fromisoformat(given)
    except ValueError:
        raise HistoryError(
            f"--since {given!r} is neither a commit of {repo} nor a date; give a commit (the last nightly's, "
            "for example) or a date such as 2026-11-20"
        ) from None
    return Since(given, date=date if date.tzinfo else date.replace(tzinfo=dt.timezone.utc))


@dataclass(frozen=True)
class Hunt:
    """How one run of the command hunts: the repository, the history, and ab's settings."""

    layout: Layout
    branch: str
    workloads: Path
    workload: str | None = None  # --workload: confirm every benchmark with this one
    benchmarks: tuple[str, ...] = ()  # -k: benchmark name patterns (substring, or glob with * ? [)
    tolerance: values.Tolerance = DEFAULT_TOLERANCE
    max_time: float = DEFAULT_MAX_TIME
    device: str = "auto"
    rule: ChangeRule = DEFAULT_RULE
    since: Since | None = None
    graph_url: str = ""  # the published page's URL ("" : its index.html in <out>/html)


@dataclass(frozen=True)
class Finding:
    """A candidate step and what ``ab`` made of it."""

    change: Change
    workload: str
    culprit: Culprit
    graph: str
    newer: bool = False  # a confirmed regression newer than --since (or any, without it)
    subject: str = ""  # the culprit's commit subject

    @property
    def regression(self) -> bool:
        return self.culprit.confirmed and self.culprit.direction == "slower"

    def to_dict(self) -> dict[str, Any]:
        change = self.change
        return {
            "benchmark": change.key.benchmark,
            "device": change.key.device,
            "machine": change.key.machine,
            "workload": self.workload,
            "before_commit": change.before_commit,
            "after_commit": change.after_commit,
            "before": change.before,
            "after": change.after,
            "ratio": change.ratio,
            "p_value": change.p_value,
            "graph": self.graph,
            "culprit": self.culprit.to_dict() | {"subject": self.subject},
            "newer_than_since": self.newer,
        }


@dataclass
class Report:
    hunt: Hunt
    findings: list[Finding] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (series or step, why not measured)
    series: int = 0
    #: each series with no confirmed step, and why: too few points, no step beyond the noise, a candidate not
    #: confirmed or not measured; and the commits left out, their ratios refused when recorded
    unconfirmed: list[tuple[SeriesKey, str]] = field(default_factory=list)

    @property
    def confirmed(self) -> list[Finding]:
        return [f for f in self.findings if f.culprit.confirmed]

    @property
    def failing(self) -> list[Finding]:
        return [f for f in self.findings if f.regression and f.newer]

    def to_dict(self) -> dict[str, Any]:
        hunt = self.hunt
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "repo": str(hunt.layout.repo),
            "branch": hunt.branch,
            "machine": hunt.layout.machine,
            "results": str(hunt.layout.results),
            "workloads_module": str(hunt.workloads),
            "tolerance": values.tolerance_json(hunt.tolerance),
            "max_time": hunt.max_time,
            "since": None if hunt.since is None else hunt.since.given,
            "series": self.series,
            "findings": [f.to_dict() for f in self.findings],
            "skipped": [{"what": what, "why": why} for what, why in self.skipped],
            "unconfirmed": [
                {"benchmark": key.benchmark, "device": key.device, "machine": key.machine, "why": why}
                for key, why in self.unconfirmed
            ],
        }


# ---------------------------------------------------------------- matching and measuring


def match_workload(benchmark: str, names: Sequence[str]) -> str | None:
    """The workload whose name ``benchmark`` contains as whole words (``_``/``.`` between them), or None.

    The one that ends last wins (the parameter comes after the test's name: ``test_mlp_train_mlp_wide_train``
    is ``mlp_wide_train``), then the longest.
    """

    def words(text: str) -> str:
        return f"_{re.sub(r'[^A-Za-z0-9]+', '_', text)}_"

    found = {n: words(benchmark).rfind(words(n)) for n in names}
    ends = {n: at + len(words(n)) for n, at in found.items() if at >= 0}
    return max(ends, key=lambda n: (ends[n], len(n))) if ends else None


def _exactly(name: str) -> str:
    """An ``ab -k`` pattern that selects ``name`` alone (a bare word would select every name containing it)."""
    return "".join(f"[{c}]" if i == 0 or c in "*?[" else c for i, c in enumerate(name))


def ab_pair(hunt: Hunt, workload: str, say: Callable[[str], None]) -> Pair:
    """Measure one workload of two commits with ``ab``, in this process; a commit that ab cannot load (its
    workloads module fails) is a probe that did not answer (``failed``), not an end of the hunt."""

    def pair(base: str, head: str) -> Probe:
        options = AbOptions(
            base=base,
            head=head,
            workloads=hunt.workloads,
            repo=hunt.layout.repo,
            device=hunt.device,
            tolerance=hunt.tolerance,
            max_time=hunt.max_time,
            select=(_exactly(workload),),
            trace="off",
        )
        try:
            result = run_ab(options, out=None)
        except AbError as exc:
            probe = Probe(base, head, "failed", reason=str(exc))
        else:
            row = next((r for r in result.result.rows if r.key == workload), None)
            if row is None:
                probe = Probe(base, head, "skipped", reason=result.result.skipped.get(workload, "not measured"))
            else:
                est = row.estimate
                ratio, low, high = (None, None, None) if est is None else (est.value, est.low, est.high)
                probe = Probe(base, head, row.verdict.value, ratio, low, high, row.head_rounds, row.reason)
        say(f"ab {workload}: {probe.text()}")
        return probe

    return pair


def graph_fragment(change: Change, base_url: str = "index.html") -> str:
    """The asv page's URL of this benchmark's graph on its machine and device, with the step's commits marked
    (asv's own regressions page links the same way)."""
    key = change.key
    params = [
        ("machine", key.machine),
        ("p-device", repr(key.device)),
        ("commits", f"{change.before_commit[:8]}-{change.after_commit[:8]}"),
    ]
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params)
    return f"{base_url}#{quote(key.benchmark, safe='.')}?{query}"


# ---------------------------------------------------------------- the hunt


def _span(repo: Path, change: Change, series: Series, changes: Sequence[Change]) -> Span:
    """The step's commits: first-parent ones after the last commit before it, up to the first after it; and the
    wider range of the segments the detector compared (from the change before it to the one after it), where a
    creep's whole rise lies."""
    points = series.points
    earlier = [c.index for c in changes if c.index < change.index]
    later = [c.index for c in changes if c.index > change.index]
    wide_before = points[max(earlier, default=0)].commit
    wide_after = points[min(later, default=len(points)) - 1].commit
    commits = _between(repo, change.before_commit, change.after_commit)
    wide = _between(repo, wide_before, wide_after) if wide_after != wide_before else ()
    return Span(change.before_commit, commits, wide_before, wide if len(wide) > len(commits) else ())


def _between(repo: Path, base: str, head: str) -> tuple[str, ...]:
    """First-parent commits after ``base`` up to ``head``, oldest first (a merge is one of them)."""
    listed = git(repo, "rev-list", "--first-parent", "--reverse", f"{base}..{head}").split()
    if not listed or listed[-1] != resolve(repo, head):
        raise HistoryError(f"{head[:8]} does not follow {base[:8]} on the first-parent line; record the branch again")
    return tuple(listed)


def _series(hunt: Hunt) -> dict[Any, Series]:
    layout = hunt.layout
    if not layout.results.is_dir():
        raise HistoryError(
            f"no history in {layout.out}: {layout.results} does not exist; record one first "
            "(pytest-gpuperf history record --last N), or pass --out with where it was recorded"
        )
    found = history_series(layout.results, order=commit_order(layout.repo, hunt.branch), machine=layout.machine)
    chosen = {key: s for key, s in found.items() if select_names([key.benchmark], hunt.benchmarks)}
    if not chosen:
        raise HistoryError(f"-k {' -k '.join(hunt.benchmarks)} matched none of the benchmarks in {layout.results}")
    longest = max(len(s.points) for s in chosen.values())
    if longest < 2 * hunt.rule.min_segment:
        refused = max(len(s.refused) for s in chosen.values())
        raise HistoryError(
            f"{layout.results} holds {counted(longest, 'recorded commit')} of branch {hunt.branch} "
            f"on machine {layout.machine}; a step needs {hunt.rule.min_segment} on each side: record at least "
            f"{2 * hunt.rule.min_segment} (pytest-gpuperf history record --last {2 * hunt.rule.min_segment})"
            + (
                f"; {counted(refused, 'more commit')} {'was' if refused == 1 else 'were'} recorded with a refused "
                "ratio (too wide, or too few rounds): record them again with --force and a longer --max-time"
                if refused
                else ""
            )
        )
    return chosen


def check_tree(repo: Path) -> None:
    """Refuse a work tree with uncommitted changes to tracked files: the report names commits, and a tree that is
    being changed (a checkout, a rebase, an edit in progress) while ab measures would not be the one reported."""
    if git(repo, "status", "--porcelain", "--untracked-files=no"):
        raise HistoryError(
            f"{repo} has uncommitted changes (git status lists them); the regressions are bisected over commits: "
            "commit or stash the changes first, then run it again"
        )


def hunt_regressions(hunt: Hunt, say: Callable[[str], None] = print) -> Report:
    """Find, confirm and bisect every step of the chosen series (see the module's docstring).

    Every check of the input (the tree, the history, the machine, the workloads module) comes first, before the
    history's lock is taken: bad input changes nothing. The lock (``history record``'s) keeps a recording from
    measuring on the same cores while ``ab`` does.
    """
    layout = hunt.layout
    check_tree(layout.repo)
    chosen = _series(hunt)
    names = _workloads(hunt)
    try:
        open_device(hunt.device)
    except DeviceError as exc:
        raise HistoryError(f"--device {hunt.device}: {exc}") from None
    report = Report(hunt, series=len(chosen))
    with exclusive(layout, "regressions"):
        for series in (chosen[key] for key in sorted(chosen)):
            _hunt_series(hunt, series, names, report, say)
    return report


def _workloads(hunt: Hunt) -> list[str]:
    """The workloads module's names at the branch's head (``--workloads`` checked, and ``--workload`` among them)."""
    try:
        names = workload_names(hunt.layout.repo, hunt.branch, hunt.workloads)
    except AbError as exc:
        raise HistoryError(str(exc)) from None
    if hunt.workload is not None and hunt.workload not in names:
        raise HistoryError(
            f"--workload {hunt.workload}: {hunt.workloads} at {hunt.branch} has no such workload; "
            f"its workloads: {', '.join(names) or 'none'}"
        )
    return names


def _hunt_series(hunt: Hunt, series: Series, names: Sequence[str], report: Report, say: Callable[[str], None]) -> None:
    repo = hunt.layout.repo
    base_url = hunt.graph_url.rstrip("/") + "/index.html" if hunt.graph_url else str(hunt.layout.html / "index.html")
    changes = changes_of(series, hunt.rule)
    outcomes: list[str] = []  # what became of each candidate step not confirmed
    for change in changes:
        step = f"{change.before_commit[:8]}..{change.after_commit[:8]} ({change.ratio - 1:+.1%})"
        where = f"{series.key} {step}"
        workload = hunt.workload or match_workload(series.key.benchmark, names)
        if hunt.since is not None and not hunt.since.newer(repo, change.after_commit):
            why = f"not newer than --since {hunt.since.given}"
        elif workload is None:
            why = "no workload's name is in the benchmark's name; name one with --workload"
        else:
            why = ""
        if why or workload is None:
            report.skipped.append((where, why))
            outcomes.append(f"{step} not measured ({why})")
            continue
        say(f"step {where}: confirming with ab, workload {workload}")
        culprit = hunt_span(_span(repo, change, series, changes), ab_pair(hunt, workload, say))
        finding = _finding(hunt, change, workload, culprit, base_url)
        report.findings.append(finding)
        if not culprit.confirmed:
            outcomes.append(f"{step} not confirmed by ab ({_confirm_cell(finding)})")
    if len(outcomes) == len(changes):
        report.unconfirmed.append((series.key, _why_unconfirmed(series, hunt.rule, outcomes)))


def _why_unconfirmed(series: Series, rule: ChangeRule, outcomes: Sequence[str]) -> str:
    """Why no step of ``series`` was confirmed: what became of each candidate, or why there was none; and the
    commits left out of the series, their ratios refused when recorded (``_anchored.py``)."""
    why = f"{counted(len(outcomes), 'candidate step')}: {'; '.join(outcomes)}" if outcomes else ""
    why = why or why_no_change(series, rule)
    if series.refused:
        commits = ", ".join(p.commit[:8] for p in series.refused[:3]) + (", ..." if len(series.refused) > 3 else "")
        why += (
            f"; {counted(len(series.refused), 'commit')} left out, "
            f"{'its ratio' if len(series.refused) == 1 else 'their ratios'} refused when recorded ({commits}: too "
            "wide, or too few rounds): record them again with --force and a longer --max-time"
        )
    return why


def _finding(hunt: Hunt, change: Change, workload: str, culprit: Culprit, base_url: str) -> Finding:
    repo = hunt.layout.repo
    newest = culprit.commit or culprit.last
    newer = culprit.direction == "slower" and (hunt.since is None or hunt.since.newer(repo, newest))
    subject = git(repo, "show", "-s", "--format=%s", culprit.commit) if culprit.commit else ""
    return Finding(change, workload, culprit, graph_fragment(change, base_url), newer, subject)


# ---------------------------------------------------------------- output


def _culprit_cell(finding: Finding) -> str:
    c = finding.culprit
    if c.kind == "unconfirmed":
        return "not confirmed"
    if c.kind == "unresolved":
        return f"one of {c.first[:8]}..{c.last[:8]}"
    text = f"{c.commit[:8]} {clipped(finding.subject, 50)}"
    if c.kind != "creep":
        return text
    return f"creep over {c.first[:8]}..{c.last[:8]}" + (f", crossed the tolerance at {text}" if c.commit else "")


def _confirm_cell(finding: Finding) -> str:
    decisive = next((p for p in finding.culprit.probes if p.role in ("confirm", "widen")), None)
    if finding.culprit.confirmed:
        decisive = next((p for p in reversed(finding.culprit.probes) if p.role in ("confirm", "widen")), decisive)
    if decisive is None or decisive.ratio is None:
        return decisive.verdict if decisive else ""
    return f"{decisive.ratio:.3f} [{decisive.low or 0:.3f}, {decisive.high or 0:.3f}] {decisive.verdict}"


def _rows(report: Report, *, links: bool) -> list[list[str]]:
    rows = []
    for f in report.findings:
        key = f.change.key
        name = f"[{key.benchmark}]({f.graph})" if links else key.benchmark
        rows.append(
            [
                f"{name} [{key.device}]",
                f"{f.change.before_commit[:8]}..{f.change.after_commit[:8]}",
                f"{f.change.ratio - 1:+.1%}",
                _confirm_cell(f),
                f.culprit.direction or "-",
                _culprit_cell(f),
                str(f.culprit.runs),
            ]
        )
    return rows


_HEADERS: Final = ["benchmark", "step", "history", "ab: after/before [95% CI]", "change", "culprit", "ab runs"]


def table(report: Report, tablefmt: str = "simple") -> str:
    return tabulate(_rows(report, links=tablefmt == "github"), headers=_HEADERS, tablefmt=tablefmt)


def lines(report: Report) -> list[str]:
    """Under the table: each finding's probes, the steps not measured, and the verdict."""
    out = []
    for f in report.findings:
        out.append(f"{f.change.key}: graph {f.graph}")
        out += [f"  {p.role}: {p.text()}" + (f": {p.reason}" if p.ratio is None else "") for p in f.culprit.probes]
    out += [f"not measured: {what}: {why}" for what, why in report.skipped]
    out += [f"nothing confirmed in {key}: {why}" for key, why in report.unconfirmed]
    confirmed = report.confirmed
    slower = sum(f.culprit.direction == "slower" for f in confirmed)
    since = report.hunt.since
    tail = f" newer than --since {since.given}" if since is not None else ""
    out.append(
        f"{counted(len(report.findings), 'candidate step')} in {report.series} series: "
        f"{slower} confirmed slower, {len(confirmed) - slower} confirmed faster; "
        f"{counted(len(report.failing), 'regression')}{tail}"
    )
    return out


def summary_markdown(report: Report) -> str:
    """The table for ``$GITHUB_STEP_SUMMARY``, each benchmark linked to its asv graph."""
    body = table(report, "github") if report.findings else "No step in the history."
    return (
        "\n".join(["### pytest-gpuperf history regressions", "", body, "", *[f"- {x}" for x in lines(report)[-1:]]])
        + "\n\n"
    )


def write_report(report: Report, path: Path) -> None:
    try:
        atomic_write_text(path, json.dumps(report.to_dict(), indent=1) + "\n", kind=REGRESSIONS_OUTPUT)
    except ResultsError as exc:
        raise HistoryError(str(exc)) from None


def check_output(path: Path | None) -> None:
    """``--json``: told before any measuring whether it can be written."""
    if path is not None:
        problem = output_problem(path, REGRESSIONS_OUTPUT)
        if problem:
            raise HistoryError(f"--json {path}: {problem}")


def report_summary(report: Report) -> list[str]:
    return append_summary(summary_markdown(report), "gpuperf history regressions")
