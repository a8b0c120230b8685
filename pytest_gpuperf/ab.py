"""The interleaved A/B gate: ``python -m pytest_gpuperf ab --base main`` measures base and head side by side.

On a shared machine the speed of a whole process changes from run to run (the mean of
several rounds of one step varied between processes with a standard deviation of 11%
on this project's 2-vCPU machine, with no other process in sight), so any comparison
of runs made in separate processes needs many processes a side. Here both sides run in
ONE process, round by round:

1. Trees. The base revision is checked out in a temporary ``git worktree`` (always
   removed); head is the working tree, or ``--head REV`` in a second worktree.
2. Loading. The workloads module (``--workloads``, default ``suites/workloads.py``) is
   imported from each tree under a package name of its own (``_gpuperf_ab_base``,
   ``_gpuperf_ab_head``), so that its relative imports (``from .models import mlp``)
   resolve within that copy; the installed pytest_gpuperf serves both. Code that a
   workloads module reaches by an absolute import from either tree would be one copy
   shared by both sides, blind to the change, so that is refused.
3. Measuring. For every workload of both ``WORKLOADS`` dicts that can run on the
   device, base's and head's steps are built afresh before every round and timed in
   alternating order (``paired.py``): memory layout, the largest bias between two
   steps in one process, is drawn anew each round, and the machine's state is shared.
4. Verdict. The ratio head/base is the median of the per-round time ratios, with its
   distribution-free 95% interval; the rule is ``compare.verdict_for``'s: slower or
   faster when significant and beyond the tolerance, unchanged when within it and the
   interval rules out twice the tolerance, else inconclusive. *new* and *missing*:
   only one side has the workload (or can build it); *incomparable*: no unit of the
   work per step is unchanged (another workload, not a slower one; the same samples
   with more FLOP counted is compared, ``compare.work_difference``).
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from tabulate import tabulate

from . import fingerprint
from .compare import DEFAULT_TOLERANCE, UNCHANGED_REACH, Verdict, count_verdicts, verdict_for, work_difference
from .devices import Backend, DeviceError, DeviceSlot, backend_for, parse_device_option, probe_inventory
from .devices import resolve_devices as resolve_device_slots
from .gitrepo import GitError, resolve, toplevel, worktree
from .paired import Estimate, measure_paired
from .records import ResultsError, atomic_write_text
from .settings import Settings
from .units import format_duration
from .workload import Step, WorkloadUnsupported, resolve_size

__all__ = ["SCHEMA", "AbError", "AbOptions", "AbResult", "AbRow", "Ratio", "Tree", "load_workloads", "run"]

SCHEMA: Final = "pytest-gpuperf/ab"
SCHEMA_VERSION: Final = 1
DEFAULT_WORKLOADS: Final = Path("suites/workloads.py")
DEFAULT_MAX_TIME: Final = 5.0
#: The package names the two copies of the workloads module are imported under.
ALIASES: Final = {"base": "_gpuperf_ab_base", "head": "_gpuperf_ab_head"}
HEADERS: Final = ("workload", "base", "head", "head/base [95% CI]", "rounds", "verdict", "why")


class AbError(Exception):
    """Bad input (not a repository, unknown revision, no workloads module ...); the message says the fix."""


@dataclass(frozen=True)
class AbOptions:
    base: str
    head: str | None = None  # None: the working tree
    workloads: Path = DEFAULT_WORKLOADS
    repo: Path = Path(".")
    device: str = "auto"
    size: str = "auto"
    tolerance: float = DEFAULT_TOLERANCE
    max_time: float = DEFAULT_MAX_TIME
    threads: int | None = None  # None: one on a CPU (as the suites measure), torch's default elsewhere
    select: tuple[str, ...] = ()
    fail_on: frozenset[str] = frozenset({Verdict.SLOWER.value})
    json: Path | None = None


# ---------------------------------------------------------------- trees


@dataclass(frozen=True)
class Tree:
    """One side: what the user named, the commit, where its files are."""

    side: str  # "base" or "head"
    rev: str  # as given, or "the working tree"
    commit: str
    path: Path
    dirty: bool = False

    def describe(self) -> str:
        short = self.commit[:8] or "no commit"
        if self.rev == "the working tree":
            return f"the working tree ({short}{' + uncommitted changes' if self.dirty else ''})"
        return f"{self.rev} ({short})"


def _repository(path: Path) -> Path:
    try:
        return toplevel(path.resolve())
    except GitError:
        raise AbError(
            f"{path.resolve()} is not inside a git repository; run the ab command in your project's checkout "
            "or pass --repo with its path"
        ) from None


def _commit(repo: Path, rev: str, flag: str) -> str:
    try:
        return resolve(repo, rev)
    except GitError:
        raise AbError(
            f"{flag} {rev!r} is not a commit of {repo}; name a branch, tag or commit (git log --oneline lists them; "
            "in a shallow CI clone fetch it first, for example git fetch origin main)"
        ) from None


@contextmanager
def trees(repo: Path, base: str, head: str | None) -> Iterator[tuple[Tree, Tree]]:
    """Base (and head, when it is a revision) checked out in temporary worktrees, removed at the end."""
    base_commit = _commit(repo, base, "--base")
    head_commit = _commit(repo, head, "--head") if head is not None else None
    with ExitStack() as stack:
        base_tree = Tree("base", base, base_commit, stack.enter_context(worktree(repo, base_commit, prefix="ab-")))
        if head is not None and head_commit is not None:
            path = stack.enter_context(worktree(repo, head_commit, prefix="ab-"))
            yield base_tree, Tree("head", head, head_commit, path)
        else:
            state = fingerprint.git_state(repo)
            yield base_tree, Tree("head", "the working tree", state.get("commit", ""), repo, bool(state.get("dirty")))


# ---------------------------------------------------------------- loading side by side


def _forget(alias: str) -> None:
    for name in [n for n in sys.modules if n == alias or n.startswith(alias + ".")]:
        del sys.modules[name]


def _package_top(path: Path, root: Path) -> Path:
    """The outermost package directory above ``path`` inside ``root`` (its own directory if none)."""
    top = path.parent
    while top != root and (top / "__init__.py").is_file() and (top.parent / "__init__.py").is_file():
        top = top.parent
    return top


def _import_aliased(path: Path, root: Path, alias: str) -> ModuleType:
    """Import the module at ``path`` with its package renamed to ``alias`` (relative imports stay inside)."""
    top = _package_top(path, root)
    init = top / "__init__.py"
    spec = (
        importlib.util.spec_from_file_location(alias, init, submodule_search_locations=[str(top)])
        if init.is_file()
        else importlib.machinery.ModuleSpec(alias, None, is_package=True)
    )
    if spec is None:  # pragma: no cover - a .py file always has a spec
        raise ImportError(f"no import spec for {init}")
    spec.submodule_search_locations = [str(top)]
    package = importlib.util.module_from_spec(spec)
    sys.modules[alias] = package
    if spec.loader is not None:
        spec.loader.exec_module(package)
    parts = path.relative_to(top).with_suffix("").parts
    return importlib.import_module(".".join((alias, *parts))) if parts != ("__init__",) else package


def _outside_environment(path: Path) -> bool:
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return not any(path.is_relative_to(prefix) for prefix in prefixes)


def _shared(new: Iterable[str], roots: Sequence[Path]) -> list[tuple[str, Path]]:
    """Modules imported by absolute name from one of the trees (not the aliases, not pytest_gpuperf)."""
    out = []
    for name in sorted(new):
        if name.split(".")[0] in (*ALIASES.values(), "pytest_gpuperf"):
            continue
        file = getattr(sys.modules.get(name), "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        if _outside_environment(path) and any(path.is_relative_to(root) for root in roots):
            out.append((name, path))
    return out


def load_workloads(tree: Tree, relative: Path, roots: Sequence[Path]) -> dict[str, Any]:
    """``WORKLOADS`` of the workloads module in ``tree``, imported under that side's own package name."""
    path = tree.path / relative
    where = f"{relative} in {tree.side} {tree.describe()}"
    if not path.is_file():
        raise AbError(
            f"{relative} does not exist in {tree.side} {tree.describe()}; pass --workloads with the path of the "
            "workloads module (relative to the repository root) that both revisions have"
        )
    alias = ALIASES[tree.side]
    _forget(alias)
    before = set(sys.modules)
    try:
        module = _import_aliased(path, tree.path, alias)
    except Exception as exc:  # noqa: BLE001 - any error in the user's module is bad input, reported with its cause
        raise AbError(f"importing {where} failed: {type(exc).__name__}: {exc}; fix the module") from None
    shared = _shared(set(sys.modules) - before, roots)
    if shared:
        names = ", ".join(name for name, _ in shared[:4]) + (", ..." if len(shared) > 4 else "")
        raise AbError(
            f"{where} imported {names} by their absolute names from {shared[0][1].parent}, so base and head would "
            "share one copy of them and the comparison could not see a change there; import them relatively "
            "(from .models import ...) from inside the workloads package"
        )
    workloads = getattr(module, "WORKLOADS", None)
    if not isinstance(workloads, Mapping) or not all(callable(getattr(w, "build", None)) for w in workloads.values()):
        raise AbError(
            f"{where} has no WORKLOADS dict of name -> pytest_gpuperf.workload.Workload; define one "
            "(suites/workloads.py shows how)"
        )
    return {str(name): workload for name, workload in workloads.items()}


# ---------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Ratio:
    """Time per call head/base: median of the per-round ratios, with its distribution-free interval."""

    ratio: float
    low: float
    high: float
    confidence: float

    @property
    def significant(self) -> bool:
        return self.low > 1.0 or self.high < 1.0

    @classmethod
    def of(cls, estimate: Estimate) -> Ratio:
        return cls(estimate.median, estimate.low, estimate.high, estimate.confidence)


@dataclass(frozen=True)
class AbRow:
    """One workload's comparison; samples are seconds per call of each round, base and head alike indexed."""

    name: str
    verdict: Verdict
    reason: str
    ratio: Ratio | None = None
    base_samples: tuple[float, ...] = ()
    head_samples: tuple[float, ...] = ()
    base_work: Mapping[str, float] = field(default_factory=dict)
    head_work: Mapping[str, float] = field(default_factory=dict)
    iterations: int = 0
    seconds: float = 0.0
    stop_reason: str = ""

    @property
    def rounds(self) -> int:
        return len(self.head_samples)

    def to_dict(self) -> dict[str, Any]:
        ratio = None if self.ratio is None else vars(self.ratio)
        return {
            "name": self.name,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "ratio": ratio,
            "rounds": self.rounds,
            "iterations": self.iterations,
            "seconds": self.seconds,
            "stop_reason": self.stop_reason,
            "base_work": dict(self.base_work),
            "head_work": dict(self.head_work),
            "base": list(self.base_samples),
            "head": list(self.head_samples),
        }


def reason_for(verdict: Verdict, ratio: Ratio, tolerance: float) -> str:
    change = f"{ratio.ratio - 1:+.1%}"
    if verdict in (Verdict.SLOWER, Verdict.FASTER):
        return f"{change}: significant and over the {tolerance:.0%} tolerance"
    if verdict is Verdict.UNCHANGED:
        return f"within the {tolerance:.0%} tolerance" + (f" ({change}, significant)" if ratio.significant else "")
    if 1.0 / (1.0 + tolerance) <= ratio.ratio <= 1.0 + tolerance:
        return f"{change}, but the interval cannot rule out {UNCHANGED_REACH * tolerance:.0%}; raise --max-time"
    return f"{change}, but not significant; raise --max-time"


# ---------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Bench:
    """Where and how every workload is measured."""

    slot: DeviceSlot
    backend: Backend
    size: str
    settings: Settings
    tolerance: float

    @property
    def device(self) -> Any:
        import torch

        return torch.device(self.slot.id)


def _try_build(workload: Any, bench: Bench) -> Step | str:
    """A working step (built and called once), or why not (``unsupported: ...`` / ``failed: ...``)."""
    why = workload.why_unsupported(bench.device) if callable(getattr(workload, "why_unsupported", None)) else None
    if why:
        return f"unsupported on {bench.slot.id}: {why}"
    try:
        step = workload.build(bench.device, bench.size)
        if not isinstance(step, Step):
            return f"failed: build returned {type(step).__name__}, not a pytest_gpuperf.workload.Step"
        step.fn()
    except WorkloadUnsupported as exc:
        return f"unsupported on {bench.slot.id}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a broken build is a verdict of that side, not a crash of the gate
        return f"failed: {type(exc).__name__}: {exc}"
    return step


def _one_sided(name: str, base: Step | str | None, head: Step | str | None) -> AbRow | str:
    """The row, or why the workload is skipped, when one side lacks the workload or cannot build it."""
    if isinstance(head, Step):
        return AbRow(name, Verdict.NEW, "not in base" if base is None else f"base's build {base}")
    if isinstance(base, Step):
        return AbRow(name, Verdict.MISSING, "not in head" if head is None else f"head's build {head}")
    return f"head's build {head}" if head is not None else f"base's build {base}"


def compare_workload(name: str, base: Any, head: Any, bench: Bench) -> AbRow | str:
    """One workload's row, or why it was skipped (unsupported on the device on both sides, ...)."""
    base_step = None if base is None else _try_build(base, bench)
    head_step = None if head is None else _try_build(head, bench)
    if not (isinstance(base_step, Step) and isinstance(head_step, Step)):
        return _one_sided(name, base_step, head_step)
    base_work, head_work = dict(base_step.work), dict(head_step.work)
    comparable, difference = work_difference(base_work, head_work)
    if not comparable:
        return AbRow(
            name,
            Verdict.INCOMPARABLE,
            f"{difference}: another workload, not a slower one (give it a new name)",
            base_work=base_work,
            head_work=head_work,
        )
    del base_step, head_step  # every round builds afresh from here on
    return _measure(name, base, head, bench, base_work, head_work, difference)


def _measure(
    name: str,
    base: Any,
    head: Any,
    bench: Bench,
    base_work: Mapping[str, float],
    head_work: Mapping[str, float],
    difference: str,
) -> AbRow:
    device, size = bench.device, bench.size
    factories: dict[str, Callable[[], Step]] = {
        "base": lambda: base.build(device, size),
        "head": lambda: head.build(device, size),
    }
    try:
        paired = measure_paired(factories, bench.backend, bench.settings, device=bench.slot.id)
    except Exception as exc:  # noqa: BLE001 - reported as this workload's verdict, the others still run
        return AbRow(name, Verdict.MISSING, f"measuring failed: {type(exc).__name__}: {exc}")
    ratio = Ratio.of(paired.time_ratio("head", "base"))
    verdict = verdict_for(ratio, bench.tolerance)
    measured = paired.measurements["head"]
    return AbRow(
        name,
        verdict,
        reason_for(verdict, ratio, bench.tolerance) + (f"; {difference}" if difference else ""),
        ratio,
        tuple(paired.times["base"]),
        tuple(paired.times["head"]),
        dict(base_work),
        dict(head_work),
        measured.iterations,
        measured.sampling_seconds,
        measured.stop_reason,
    )


# ---------------------------------------------------------------- the result


@dataclass
class AbResult:
    base: Tree
    head: Tree
    bench: Bench
    workloads: Path
    fail_on: frozenset[str]
    rows: list[AbRow] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def failing(self) -> list[AbRow]:
        return [row for row in self.rows if row.verdict.value in self.fail_on]

    def counts(self) -> dict[str, int]:
        return count_verdicts(self.rows)

    def table(self, tablefmt: str = "simple") -> str:
        rows = [
            (
                row.name,
                format_duration(sorted(row.base_samples)[row.rounds // 2]) if row.rounds else "-",
                format_duration(sorted(row.head_samples)[row.rounds // 2]) if row.rounds else "-",
                "-" if row.ratio is None else f"{row.ratio.ratio:.3f} [{row.ratio.low:.3f}, {row.ratio.high:.3f}]",
                str(row.rounds) if row.rounds else "-",
                "SLOWER" if row.verdict is Verdict.SLOWER else row.verdict.value,
                row.reason,
            )
            for row in self.rows
        ]
        return tabulate(rows, headers=HEADERS, tablefmt=tablefmt, disable_numparse=True)

    def summary(self) -> list[str]:
        lines = [f"skipped {name}: {why}" for name, why in self.skipped.items()]
        counts = ", ".join(f"{n} {verdict}" for verdict, n in self.counts().items()) or "nothing compared"
        fail_on = ",".join(sorted(self.fail_on)) or "none"
        if self.failing:
            names = ", ".join(row.name for row in self.failing)
            lines.append(f"gpuperf ab: FAILED ({counts}; failing on {fail_on}): {names}")
        else:
            lines.append(f"gpuperf ab: passed ({counts}; failing on {fail_on})")
        return lines

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
            "tolerance": bench.tolerance,
            "max_time": bench.settings.max_time,
            "fail_on": sorted(self.fail_on),
            "fingerprint": fingerprint.collect(self.head.path),
            "results": [row.to_dict() for row in self.rows],
            "skipped": dict(self.skipped),
        }


# ---------------------------------------------------------------- the command


def _bench(options: AbOptions) -> Bench:
    try:
        slots = resolve_device_slots(parse_device_option(options.device), probe_inventory())
    except DeviceError as exc:
        raise AbError(f"--device {options.device}: {exc}") from None
    if len(slots) != 1:
        raise AbError(f"--device {options.device} names {len(slots)} devices; ab measures on one, e.g. --device cpu")
    slot = slots[0]
    if not slot.available:
        raise AbError(f"--device {options.device}: {slot.reason}; choose a device this machine has (--device cpu)")
    threads = options.threads if options.threads is not None else (1 if slot.kind == "cpu" else None)
    settings = Settings(
        max_time=options.max_time,
        warmup_time=min(1.0, options.max_time),
        min_time=min(0.1, options.max_time),
        threads=threads,
        memory=False,
    )
    size = resolve_size(options.size, slot.kind)
    return Bench(slot, backend_for(slot), size, settings, options.tolerance)


def _selected(names: Iterable[str], patterns: Sequence[str]) -> list[str]:
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


def _check_json(path: Path | None) -> None:
    if path is None:
        return
    parent = path.resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise AbError(f"--json {path}: {parent} is not a writable directory; choose a writable location")


def run(options: AbOptions, *, out: Callable[[str], None] = print) -> AbResult:
    """Load both sides, measure every common workload, and return the rows (printing progress to ``out``)."""
    repo = _repository(options.repo)
    relative = _workloads_path(repo, options.workloads)
    _check_json(options.json)
    bench = _bench(options)
    try:
        with trees(repo, options.base, options.head) as (base, head):
            roots = [base.path.resolve(), head.path.resolve()]
            sides = {tree.side: load_workloads(tree, relative, roots) for tree in (base, head)}
            result = AbResult(base, head, bench, relative, options.fail_on)
            _header(result, out)
            _run_all(result, sides["base"], sides["head"], options.select, out)
    except GitError as exc:
        raise AbError(f"{exc}; check the repository and the revisions") from None
    finally:
        for alias in ALIASES.values():
            _forget(alias)
    return result


def _header(result: AbResult, out: Callable[[str], None]) -> None:
    bench = result.bench
    threads = bench.settings.threads or "torch's default"
    out(f"gpuperf ab: base {result.base.describe()}, head {result.head.describe()}")
    out(
        f"{result.workloads} on {bench.slot.id} ({bench.backend.describe().get('name', bench.slot.id)}), "
        f"threads: {threads}, size {bench.size}, tolerance {bench.tolerance:.0%}, "
        f"up to {bench.settings.max_time:g} s of rounds per workload"
    )


def _run_all(
    result: AbResult,
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    select: Sequence[str],
    out: Callable[[str], None],
) -> None:
    everything = [*head, *(name for name in base if name not in head)]
    names = _selected(everything, select)
    if select and not names:
        raise AbError(f"-k {' -k '.join(select)} matched none of the workloads ({', '.join(everything)})")
    for name in names:
        start = time.perf_counter()
        row = compare_workload(name, base.get(name), head.get(name), result.bench)
        if isinstance(row, str):
            result.skipped[name] = row
            out(f"  {name}: skipped, {row}")
            continue
        result.rows.append(row)
        ratio = "" if row.ratio is None else f"{row.ratio.ratio:.3f} [{row.ratio.low:.3f}, {row.ratio.high:.3f}], "
        out(f"  {name}: {ratio}{row.verdict.value} ({row.rounds} rounds, {time.perf_counter() - start:.1f} s)")


def write_json(result: AbResult, path: Path) -> None:
    try:
        atomic_write_text(path, json.dumps(result.to_dict(), indent=1) + "\n")
    except ResultsError as exc:
        raise AbError(str(exc)) from None
