"""The interleaved A/B gate: ``pytest-gpuperf ab --base main`` measures base and head side by side.

On a shared machine the speed of a whole process changes from run to run, with no
other process in sight (``bench/evidence/gate-power.md``), so any comparison of runs made in
separate processes needs many processes a side. Here both sides run in
ONE process, round by round:

1. Trees and loading (``_ab_load.py``): base checked out aside, each side's workloads
   module (``--workloads``, default the package ``suites/workloads``) imported on its own.
   A repository without ``suites/workloads`` (not a clone of this project) gets the suites'
   workloads installed with the package, one copy for both sides: an A/A run of the machine.
2. Measuring. For every workload of both ``WORKLOADS`` dicts that can run on the
   device, base's and head's steps are built afresh before every round and timed in an
   order drawn at random (``measuring.measure_paired``): memory layout, the largest bias
   between two steps in one process, is drawn anew each round, and the machine's state
   is shared.
3. Verdict. The ratio head/base is the median of the per-round time ratios, with its
   distribution-free 95% interval, judged by the gate's rule (``_rule.verdict_for``).
   *new* and *missing*: only one side has the workload (or can build it);
   *incomparable*: no unit of the work per step is unchanged (another workload, not a
   slower one; the same samples with more FLOP counted is compared).
4. Confirmation. A row step 3 calls slower or faster is measured again in fresh builds (each
   side's module imported anew) and judged on those (``_ab_confirm.py``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .. import _suites
from .._git import GitError, worktree
from .._progress import Progress, format_elapsed
from ..measuring import (
    DeviceError,
    Estimate,
    MeasureSettings,
    Paired,
    Threads,
    counted,
    open_device,
    readings,
    resolve_size,
    values,
)
from ..results import (
    DEFAULT_RESULTS_DIR,
    OutputKind,
    ResultsDir,
    ResultsError,
    atomic_write_text,
    collect,
    output_problem,
)
from ._ab_confirm import CONFIRM_BUILDS, RUN_FALSE_ALARMS, confirmed, run_confidence, suspect
from ._ab_load import (
    ALIASES,
    AbError,
    Tree,
    forget,
    load_installed,
    load_workloads,
    module_file,
    repository,
    resolve_commit,
    trees,
)
from ._ab_measure import Bench, compare_workload, measure_again
from ._compare import GateResult, Row
from ._rule import DEFAULT_TOLERANCE, POWER, describe_tolerance, detection_target, percent
from ._traces import RowTraces, rows_to_trace, trace_rows
from ._verdicts import DEFAULT_FAIL_ON

__all__ = [
    "CONFIRM_BUILDS",
    "DEFAULT_MAX_TIME",
    "DEFAULT_WORKLOADS",
    "DEFAULT_WORKLOADS_HELP",
    "SCHEMA",
    "AbError",
    "AbOptions",
    "AbResult",
    "run",
    "select_names",
    "workload_names",
    "write_json",
]

SCHEMA: Final = "pytest-gpuperf/ab"
SCHEMA_VERSION: Final = 1


#: ``ab --json``: replaces only an ab result of ours (its ``"schema": "pytest-gpuperf/ab"``).
AB_OUTPUT: Final = OutputKind.of_schema("ab result", "ab.json", SCHEMA)
#: The suites' workloads package in a clone; a revision where it is still the module ``suites/workloads.py`` is
#: found too. A repository without it gets the installed suites' (``_default_workloads``).
DEFAULT_WORKLOADS: Final = _suites.CLONE / "workloads"
#: What ``--help`` says of the default.
DEFAULT_WORKLOADS_HELP: Final = (
    f"{DEFAULT_WORKLOADS} when the repository has it, else the suites' workloads installed with pytest-gpuperf "
    f"({_suites.PACKAGE}.workloads), one copy run by both sides: an A/A run of this machine"
)
DEFAULT_MAX_TIME: Final = 5.0


@dataclass(frozen=True)
class AbOptions:
    base: str
    head: str | None = None  # None: the working tree
    workloads: Path | None = None  # None: DEFAULT_WORKLOADS_HELP's rule
    repo: Path = Path(".")
    device: str = "auto"
    size: str = "auto"
    tolerance: values.Tolerance = DEFAULT_TOLERANCE
    max_time: float = DEFAULT_MAX_TIME
    threads: Threads = "auto"
    select: tuple[str, ...] = ()
    fail_on: frozenset[str] = frozenset(DEFAULT_FAIL_ON)
    json: Path | None = None
    #: whose traces to write: ``failing`` rows, ``all``, ``off`` (``_traces.py``), under ``results_dir``/traces/
    trace: str = "failing"
    results_dir: Path = DEFAULT_RESULTS_DIR
    #: fresh builds each row the first pass calls slower or faster is measured in again (``_ab_confirm.py``; 0: none)
    confirm: int = CONFIRM_BUILDS
    #: ``--detect``: rounds run until each row can see this change (at ``POWER``), or to ``max_time``; None: until
    #: the ratio's interval is within 1%
    detect: float | None = None


@dataclass
class AbResult:
    base: Tree
    head: Tree
    bench: Bench
    workloads: Path
    result: GateResult
    #: the traces written (``--trace``), one per row traced, and their folder
    traces: list[RowTraces] = field(default_factory=list)
    traces_dir: Path | None = None
    trace_error: str = ""  # why no trace was written (an unwritable results directory)
    #: the installed suites' workloads ran on both sides: the folder ``workloads`` is relative to; None when the
    #: workloads module is the repository's
    installed_at: Path | None = None
    #: fresh builds each suspect was confirmed in (``AbOptions.confirm``), and the first pass's ratio of each
    #: confirmed row, by name
    confirm: int = CONFIRM_BUILDS
    first_pass: dict[str, Estimate] = field(default_factory=dict)

    def false_alarm_line(self) -> str:
        """How the run's chance of any false alarm is bounded (``_ab_confirm.py``), said before the verdict."""
        rows = counted(len(self.result.rows), "row")
        if self.confirm == 0:
            return (
                f"gpuperf ab: false alarms: not confirmed (--confirm 0): each of {rows} judged alone at 95%, so a "
                "run of unchanged code can fail on any of them"
            )
        builds = counted(self.confirm, "fresh build")
        suspects = len(self.first_pass)
        if not suspects:
            return f"gpuperf ab: false alarms: no suspect among {rows} (one would be confirmed in {builds})"
        return (
            f"gpuperf ab: false alarms: {counted(suspects, 'suspect')} of {rows} confirmed in {builds} each at "
            f"{run_confidence(suspects):.1%}, so at most {RUN_FALSE_ALARMS:.0%} of runs of unchanged code raise "
            "one where builds are independent"
        )

    def same_code_warning(self) -> str:
        """With the installed workloads, why the verdicts say nothing of the revisions ('' otherwise)."""
        if self.installed_at is None:
            return ""
        return (
            f"warning: the repository has no {DEFAULT_WORKLOADS}, so both sides ran the installed suites' workloads "
            f"({self.installed_at / self.workloads}), one copy: this was an A/A run of the machine, not a comparison "
            "of the revisions; pass --workloads with your repository's workloads module to gate it"
        )

    def trace_lines(self) -> list[str]:
        """Under the table: each traced row's ``trace of NAME: base PATH, head PATH``, or why none was written."""
        return [traces.line() for traces in self.traces] + ([self.trace_error] if self.trace_error else [])

    def to_dict(self) -> dict[str, Any]:
        bench = self.bench
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "base": {"rev": self.base.rev, "commit": self.base.commit},
            "head": {"rev": self.head.rev, "commit": self.head.commit, "dirty": self.head.dirty},
            "workloads_module": str(self.workloads),
            "device": bench.slot.id,
            "size": bench.size,
            "threads": bench.settings.threads,
            "tolerance": values.tolerance_json(bench.tolerance),
            "max_time": bench.settings.max_time,
            "detect": bench.detect,
            "fail_on": sorted(self.result.fail_on),
            "fingerprint": collect(self.head.path),
            # each suspect confirmed in this many fresh builds at run_confidence(suspects): a run's chance of any
            # false alarm at most run_false_alarms where builds are independent (builds 0: not confirmed)
            "confirm": {
                "builds": self.confirm,
                "suspects": len(self.first_pass),
                "confidence": run_confidence(len(self.first_pass)) if self.first_pass else None,
                "run_false_alarms": RUN_FALSE_ALARMS if self.confirm else None,
            },
            "results": [
                _row_dict(row, self.result.fail_on) | self._traces_entry(row) | self._first_pass(row)
                for row in self.result.rows
            ],
            "skipped": dict(self.result.skipped),
        }

    def _first_pass(self, row: Row) -> dict[str, Any]:
        """The JSON row's ``first_pass``: the ratio that made it a suspect (null where it was not one)."""
        est = self.first_pass.get(row.key)
        return {"first_pass": None if est is None else {"ratio": est.value, "low": est.low, "high": est.high}}

    def _traces_entry(self, row: Row) -> dict[str, Any]:
        """The JSON row's ``traces``: ``{"base": path, "head": path}``, null for a side (or row) not traced."""
        traced = next((t for t in self.traces if t.key == row.key), None)
        return {"traces": traced.to_dict() if traced is not None else {"base": None, "head": None}}


def _row_dict(row: Row, fail_on: frozenset[str] = frozenset()) -> dict[str, Any]:
    est, paired = row.estimate, row.paired
    ratio = (
        None
        if est is None
        else {
            "ratio": est.value,
            "low": est.low,
            "high": est.high,
            "confidence": est.confidence,
            # the smallest change these rounds could see, either way, at POWER (null: too few rounds to see any)
            "detectable": row.detectable,
            "power": POWER,
            # what the rounds are worth as independent ones: below "rounds" where consecutive rounds clustered
            # and the interval was widened for it (measuring.serial_median_ci)
            "independent_rounds": est.worth,
        }
    )
    return {
        "name": row.key,
        "verdict": row.verdict.value,
        "failing": row.failing_on(fail_on),  # what fails it: its verdict, then its work ([] where it passes)
        "reason": row.reason,
        "ratio": ratio,
        # the row's own tolerance: the one given, or under auto what its rounds can see (never under auto's floor)
        "tolerance": row.tolerance,
        "rounds": len(paired.head) if paired else row.head_rounds,  # the rounds listed (a confirmed row's first pass)
        "iterations": paired.iterations if paired else 0,
        "seconds": paired.seconds if paired else 0.0,
        "stop_reason": paired.stop_reason if paired else "",
        "base_work": dict(paired.base_work) if paired else {},
        "head_work": dict(paired.head_work) if paired else {},
        "base": list(paired.base) if paired else [],
        "head": list(paired.head) if paired else [],
        "why": None if row.why is None else row.why.to_dict(),
        **_work_dict(row, fail_on),
    }


def _work_dict(row: Row, fail_on: frozenset[str]) -> dict[str, Any]:
    """What each reading's comparison found (issue 22: ``work``, the counts, and ``memory``), null where not known."""
    keys = [r.change_key for r in readings() if r.change_key]
    work_fail_on = row.work_fail_on(fail_on)
    return {key: change.to_dict(work_fail_on) if (change := row.changes.get(key)) else None for key in keys}


def _bench(options: AbOptions) -> Bench:
    try:
        slot, backend = open_device(options.device)
    except DeviceError as exc:
        raise AbError(f"--device {options.device}: {exc}") from None
    settings = MeasureSettings(
        max_time=options.max_time,
        warmup_time=min(1.0, options.max_time),
        min_time=min(0.1, options.max_time),
        threads=options.threads,
    )
    if options.detect is not None:
        settings = dataclasses.replace(settings, target=detection_target(options.detect))
    size = resolve_size(options.size, slot.kind, backend)
    return Bench(slot, backend, size, settings, options.tolerance, options.detect)


def select_names(names: Iterable[str], patterns: Sequence[str]) -> list[str]:
    """The names ``-k`` selects: those containing a pattern, or matching it where it has ``* ? [`` (all of them
    without patterns); ``ab``'s workloads, ``history``'s benchmarks."""

    def wanted(name: str) -> bool:
        return not patterns or any(
            fnmatch.fnmatchcase(name, p) if any(c in p for c in "*?[") else p in name for p in patterns
        )

    return [name for name in names if wanted(name)]


def _workloads_path(repo: Path, given: Path) -> Path:
    """``--workloads`` relative to the repository root (an absolute path must lie inside the repository)."""
    try:
        return (repo / given).resolve().relative_to(repo.resolve())
    except ValueError:
        raise AbError(
            f"--workloads {given} is outside the repository {repo}; give its path relative to the repository root"
        ) from None


def _default_workloads(repo: Path) -> tuple[Path, Path | None]:
    """``--workloads`` not given: the repository's ``suites/workloads`` (a clone's: each side's own), else the
    installed suites' (its path relative to the folder above the installed package, and that folder)."""
    if module_file(repo, DEFAULT_WORKLOADS) is not None:
        return DEFAULT_WORKLOADS, None
    suites = _suites.installed()
    if suites is None or module_file(suites, Path("workloads")) is None:
        raise AbError(
            f"{repo} has no {DEFAULT_WORKLOADS}, and this pytest-gpuperf was installed without its suites; pass "
            "--workloads with the path of your workloads module, relative to the repository root"
        )
    return suites.relative_to(suites.parent.parent) / "workloads", suites.parent.parent


def run(options: AbOptions, *, out: Callable[[str], None] | None = print) -> AbResult:
    """Load both sides, measure every common workload, and return the result (printing progress to ``out``,
    nothing when it is None)."""
    repo = repository(options.repo)
    if options.workloads is None:
        relative, installed_at = _default_workloads(repo)
    else:
        relative, installed_at = _workloads_path(repo, options.workloads), None
    if options.json is not None and (problem := output_problem(options.json, AB_OUTPUT)):
        raise AbError(f"--json {options.json}: {problem}")
    bench = _bench(options)
    progress = Progress(out, prefix="gpuperf ab")
    aside = options.base if options.head is None else f"{options.base} and {options.head}"
    if installed_at is None:
        progress.say(f"checking out {aside} in a temporary git worktree, then importing {relative} from both sides")
    else:
        progress.say(
            f"checking out {aside} in a temporary git worktree; {repo} has no {DEFAULT_WORKLOADS}, so both sides run "
            f"the suites' workloads installed with pytest-gpuperf ({installed_at / relative}), one copy: an A/A run"
        )
    try:
        with trees(repo, options.base, options.head) as (base, head):
            sides = _load_sides(base, head, relative, installed_at)
            result = AbResult(base, head, bench, relative, GateResult([], options.fail_on), installed_at=installed_at)
            result.confirm = options.confirm
            _header(result, progress)
            _run_all(result, sides["base"], sides["head"], options.select, progress)
            _confirm_all(result, lambda: _load_sides(base, head, relative, installed_at, fresh=True), progress)
        _write_traces(result, options)
    except GitError as exc:
        raise AbError(f"{exc}; check the repository and the revisions") from None
    finally:
        for alias in ALIASES.values():
            forget(alias)
    return result


def _load_sides(
    base: Tree, head: Tree, relative: Path, installed_at: Path | None, *, fresh: bool = False
) -> dict[str, dict[str, Any]]:
    """Each side's workloads: its tree's module under its own name, or the installed suites' one copy for both;
    every call imports the trees' modules afresh, and ``fresh`` the installed one too (a fresh build)."""
    if installed_at is not None:
        if fresh:
            forget(f"{_suites.PACKAGE}.workloads")
        installed = load_installed(f"{_suites.PACKAGE}.workloads")
        return {"base": installed, "head": installed}
    roots = [base.path.resolve(), head.path.resolve()]
    return {tree.side: load_workloads(tree, relative, roots) for tree in (base, head)}


def workload_names(repo: Path, rev: str, workloads: Path = DEFAULT_WORKLOADS) -> list[str]:
    """The names in ``WORKLOADS`` of the workloads module at ``rev`` (checked out aside, as ``run`` does), for a
    caller that picks which ones to measure (``history regressions``); AbError as ``run`` gives it."""
    root = repository(repo)
    relative = _workloads_path(root, workloads)
    try:
        commit = resolve_commit(root, rev)
        with worktree(root, commit, prefix="ab-") as path:
            return list(load_workloads(Tree("head", rev, commit, path), relative, [path.resolve()]))
    except GitError as exc:
        raise AbError(f"{exc}; check the repository and the revisions") from None
    finally:
        forget(ALIASES["head"])


def _header(result: AbResult, progress: Progress) -> None:
    bench = result.bench
    threads = bench.settings.threads_for(bench.slot.kind) or "torch's default"
    progress.say(f"base {result.base.describe()}, head {result.head.describe()}")
    progress.line(
        f"{result.workloads} on {bench.slot.id} ({bench.backend.describe().get('name', bench.slot.id)}), "
        f"threads: {threads}, size {bench.size}, tolerance {describe_tolerance(bench.tolerance)}, "
        f"up to {bench.settings.max_time:g} s of rounds per workload"
        + ("" if bench.detect is None else f", until each can see {percent(bench.detect)}")
    )


def _run_all(
    result: AbResult,
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    select: Sequence[str],
    progress: Progress,
) -> None:
    everything = [*head, *(name for name in base if name not in head)]
    names = select_names(everything, select)
    if select and not names:
        raise AbError(f"-k {' -k '.join(select)} matched none of the workloads ({', '.join(everything)})")
    for number, name in enumerate(names, 1):
        start = time.perf_counter()
        row = compare_workload(name, base.get(name), head.get(name), result.bench)
        where = f"  {name} {number}/{len(names)}"
        if isinstance(row, str):
            result.result.skipped[name] = row
            progress.line(f"{where}: skipped, {row}")
            continue
        result.result.rows.append(row)
        est = row.estimate
        ratio = "" if est is None else f"{est.value:.3f} [{est.low:.3f}, {est.high:.3f}], "
        took = format_elapsed(time.perf_counter() - start)
        progress.line(f"{where}: {ratio}{row.verdict.value} ({row.head_rounds} rounds, {took})")


def _confirm_all(result: AbResult, load: Callable[[], dict[str, dict[str, Any]]], progress: Progress) -> None:
    """Every suspect row measured again in ``result.confirm`` fresh builds (each side's workloads imported anew,
    once per build for all suspects), and judged on them at the run's shared confidence (``_ab_confirm.py``)."""
    rows = result.result.rows
    suspects = [i for i, row in enumerate(rows) if suspect(row, result.result.fail_on)] if result.confirm else []
    if not suspects:
        return
    confidence = run_confidence(len(suspects))
    progress.say(
        f"confirming {counted(len(suspects), 'suspect')} in {counted(result.confirm, 'fresh build')} each, at "
        f"{confidence:.1%} (the run's {RUN_FALSE_ALARMS:.0%} shared by its suspects)"
    )
    measured: dict[int, list[Paired]] = {i: [] for i in suspects}
    failed: dict[int, list[str]] = {i: [] for i in suspects}
    for build in range(1, result.confirm + 1):
        sides = load()
        for i in suspects:
            name, start = rows[i].key, time.perf_counter()
            got = measure_again(name, sides["base"].get(name), sides["head"].get(name), result.bench)
            where = f"  {name} build {build}/{result.confirm}"
            if isinstance(got, str):
                failed[i].append(got)
                progress.line(f"{where}: {got}")
                continue
            measured[i].append(got)
            est, took = got.time_ratio("head", "base"), format_elapsed(time.perf_counter() - start)
            progress.line(f"{where}: {est.value:.3f} [{est.low:.3f}, {est.high:.3f}] ({est.count} rounds, {took})")
    for i in suspects:
        first = rows[i].estimate
        assert first is not None  # a suspect has one
        result.first_pass[rows[i].key] = first
        rows[i] = confirmed(rows[i], measured[i], failed[i], result.bench, confidence)
        progress.line(f"  {rows[i].key}: {rows[i].verdict.value} ({rows[i].reason})")


def _write_traces(result: AbResult, options: AbOptions) -> None:
    """``--trace``: both sides' traces of the failing rows (or every row) under ``traces/ab-<time>/``."""
    rows = rows_to_trace(result.result, options.trace)
    if not rows:
        return
    try:
        result.traces_dir = ResultsDir(options.results_dir).traces_of(prefix="ab-")
    except ResultsError as exc:  # the verdicts stand; only the traces are lost
        result.trace_error = f"gpuperf ab: no traces written: {exc}"
        return
    result.traces = trace_rows(rows, result.traces_dir)


def write_json(result: AbResult, path: Path) -> None:
    try:
        atomic_write_text(path, json.dumps(result.to_dict(), indent=1) + "\n", kind=AB_OUTPUT)
    except ResultsError as exc:
        raise AbError(str(exc)) from None
