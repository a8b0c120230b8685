"""asv (airspeed velocity) results written by the pytest run itself: history graphs without measuring twice.

``pytest suites/ --gpuperf-asv=DIR`` writes, at the end of the run, into the asv
results directory ``DIR`` (what asv.conf.json calls ``results_dir``):

* ``benchmarks.json``: one benchmark per test, or per measurement when a test
  measures more than once, with one asv parameter, ``device``; merged with the
  entries already there, so runs of different suites and devices add up;
* ``<machine>/machine.json``: the machine (``--gpuperf-asv-machine``, default the host name);
* ``<machine>/<commit[:8]>-<env>.json``: this commit's results in asv's results
  format (api version 2): the median, the 99% confidence interval of the median
  (asv's ``ci_99`` columns), the quartiles, samples x calls per sample and the
  raw samples, per device; merged with what this commit already has there.

``asv publish`` and ``asv compare`` read these as if ``asv run`` had written them.

**Lower is better.** asv treats every value as lower-is-better, ``track_`` ones
included (asv issue #1617). The value written is therefore the time per step in
seconds, never a throughput: a throughput drop is a rise in time, shown and gated
as a regression, and its recovery as an improvement. Throughput is the work per
step (in each benchmark's ``pretty_name``) divided by the time.

**Stable versions.** asv drops results whose benchmark ``version`` differs from
the one in ``benchmarks.json``. The version written here is the constant
``FORMAT``, not a hash of source code, so editing a test's code or comments keeps
its history; a test whose meaning changes should get a new name.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._git import GitError, commit_time, git
from ..results import Fingerprint, Record, Run, locked, output_path_problem
from ._asv_files import (
    BENCHMARKS_API,
    COLUMNS,
    FORMAT,
    MACHINE_API,
    REFUSED,
    RESULTS_API,
    UNIT,
    AsvError,
    Point,
    load_json,
    points_of,
    read_results,
    refused_reasons,
    row_of,
    unrepr,
    write_json,
)

__all__ = [
    "AsvTarget",
    "Commit",
    "benchmark_name",
    "machine_info",
    "machine_name",
    "time_ms",
    "write_points",
    "write_results",
]

_MACHINE_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: An asv machine name names a directory: at most the bytes of one name in a path (``check_machine_name``).
MACHINE_NAME_MAX: Final = 255


@dataclass(frozen=True)
class Commit:
    hash: str
    #: committer time in milliseconds, as asv stores a commit's date
    date_ms: int


# ---------------------------------------------------------------- names and identity


def benchmark_name(record: Record) -> str:
    """``suites/test_mlp.py::test_train[cpu-bf16]::fwd`` -> ``suites.test_mlp.test_train_bf16.fwd``.

    The device leaves the name (it is the asv parameter); characters asv cannot
    take in a name (``-`` means a parameter index to asv) become ``_``.
    """
    head, _, ids = record.test.partition("[")
    kept = [part for part in ids.removesuffix("]").split("-") if part and part != record.device] if ids else []
    path, _, rest = head.partition("::")
    parts = [*path.removesuffix(".py").split("/"), *rest.split("::")]
    if kept:
        parts[-1] += "_" + "_".join(kept)
    if record.measurement.name not in ("", record.test):
        parts.append(record.measurement.name)
    return ".".join(p for p in (_clean(part) for part in parts) if p)


def _clean(part: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", part)).strip("_")


def machine_name(given: str | None) -> str:
    """The asv machine name: the one given, else this host's name; AsvError when it cannot name a directory."""
    return check_machine_name(given or platform.node() or "localhost")


def check_machine_name(name: str) -> str:
    if len(name) > MACHINE_NAME_MAX:
        raise AsvError(
            f"asv machine name {name[:20]!r}... is {len(name)} characters, over the {MACHINE_NAME_MAX} that a "
            "directory name may have; give a shorter one, for example --gpuperf-asv-machine=gpu-box-1"
        )
    if not _MACHINE_NAME.match(name):
        raise AsvError(
            f"asv machine name {name!r} is not usable as a directory name; "
            "use letters, digits, '.', '_' and '-', for example --gpuperf-asv-machine=gpu-box-1"
        )
    return name


def git_commit(root: Path) -> Commit:
    """The commit checked out at ``root`` and its date; AsvError when ``root`` is not in a git work tree."""
    try:
        commit = git(root, "rev-parse", "HEAD")
        return Commit(commit, commit_time(root, commit) * 1000)
    except GitError as exc:
        raise AsvError(
            f"asv results belong to a commit, but git cannot tell the commit of {root} ({exc}); "
            "run from a git work tree with at least one commit"
        ) from None


def machine_info(fingerprint: Fingerprint, machine: str) -> dict[str, str]:
    """asv's machine fields, from the run's fingerprint; ``gpu`` is added where CUDA devices exist."""
    info = {
        "machine": machine,
        "os": _text(fingerprint.platform),
        "arch": _text(fingerprint.machine),
        "cpu": _text(fingerprint.cpu_model),
        "num_cpu": _text(fingerprint.cpu_count),
        "ram": _ram(),
    }
    gpus = [_text(d.name) for d in fingerprint.cuda_devices or ()]
    if gpus:
        info["gpu"] = ", ".join(gpus)
    return info


def _ram() -> str:
    try:
        return str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return ""


def _text(value: str | int | None) -> str:
    """A fingerprint's fact as asv's text; "" when not recorded."""
    return "" if value is None else str(value)


def _environment(fingerprint: Fingerprint) -> tuple[str, str, dict[str, str]]:
    """(env name, python version, requirements): a torch upgrade starts a new line in the graphs, as in asv."""
    python = ".".join((fingerprint.python or "").split(".")[:2]) or "unknown"
    requirements = {"torch": fingerprint.torch if fingerprint.torch is not None else "unknown"}
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", f"gpuperf-py{python}-torch{requirements['torch']}")
    return name, python, requirements


# ---------------------------------------------------------------- writing


def write_results(directory: Path, run: Run, *, machine: str, commit: Commit) -> Path:
    """Write ``run`` as asv results for ``commit`` into ``directory``; return the results file written."""
    started = time_ms(run.created)
    if started is None:  # a run whose creation time cannot be read: stamped now
        started = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    points, described, tests = _collect(run.records, started)
    if not points:
        raise AsvError(f"no measurements to write to {Path(directory)}: the run measured nothing")
    code = {name: f"# measured by pytest-gpuperf ({described[name]}):\n# pytest {tests[name]}" for name in points}
    pretty = {name: f"{name} ({described[name]})" for name in points}
    return write_points(
        directory,
        points,
        code=code,
        pretty=pretty,
        unit=UNIT,
        fingerprint=run.fingerprint,
        machine=machine,
        commit=commit,
    )


def write_points(
    directory: Path,
    points: Mapping[str, Mapping[str, Point]],
    *,
    code: Mapping[str, str],
    pretty: Mapping[str, str],
    unit: str,
    fingerprint: Fingerprint,
    machine: str,
    commit: Commit,
) -> Path:
    """Write ``{benchmark: {device: Point}}`` as asv results for ``commit``, merged with what is there; return the
    results file written. ``code`` and ``pretty`` are each benchmark's entry in ``benchmarks.json`` (what asv shows
    as its code and its name), ``unit`` the unit of every value (lower is better, whatever it is)."""
    directory = Path(directory)
    check_machine_name(machine)
    # Sessions (several machines of a fleet, or xdist-free parallel jobs) may write into one directory at once:
    # each shared file is re-read, merged and written under its own lock, as baselines are (results._files).
    benchmarks = directory / "benchmarks.json"
    benchmarks.parent.mkdir(parents=True, exist_ok=True)
    with locked(benchmarks):
        _write_benchmarks(benchmarks, points, code, pretty, unit)
    info = machine_info(fingerprint, machine)
    write_json(directory / machine / "machine.json", {**info, "version": MACHINE_API})
    env_name, python, requirements = _environment(fingerprint)
    path = directory / machine / f"{commit.hash[:8]}-{env_name}.json"
    with locked(path):
        _merge_results(path, commit, env_name, info, python, requirements, points)
    return path


def _merge_results(
    path: Path,
    commit: Commit,
    env_name: str,
    info: Mapping[str, str],
    python: str,
    requirements: Mapping[str, str],
    points: Mapping[str, Mapping[str, Point]],
) -> None:
    existing = read_results(path) if path.exists() else {}
    rows = existing.get("results", {})
    kept = existing.get(REFUSED)
    refused: dict[str, Any] = dict(kept) if isinstance(kept, dict) else {}
    for name, by_device in points.items():
        merged = {**points_of(existing, name), **by_device}
        rows[name] = row_of(merged)
        refused[name] = refused_reasons(merged)
    refused = {name: reasons for name, reasons in sorted(refused.items()) if reasons}
    data = {
        "commit_hash": commit.hash,
        "env_name": env_name,
        "date": commit.date_ms,
        "params": {**info, "python": python, **requirements},
        "python": python,
        "requirements": requirements,
        "env_vars": {},
        "result_columns": list(COLUMNS),
        "results": rows,
        "durations": existing.get("durations", {}),
        **({REFUSED: refused} if refused else {}),
        "version": RESULTS_API,
    }
    write_json(path, data)


def _collect(
    records: Iterable[Record], started: int
) -> tuple[dict[str, dict[str, Point]], dict[str, str], dict[str, str]]:
    """{name: {device: Point}}, {name: description}, {name: test id without device}."""
    points: dict[str, dict[str, Point]] = {}
    described: dict[str, str] = {}
    tests: dict[str, str] = {}
    owners: dict[tuple[str, str], str] = {}
    for record in records:
        name = benchmark_name(record)
        if not name:
            raise AsvError(f"{record.key}: cannot make an asv benchmark name of it; rename the test")
        other = owners.setdefault((name, record.device), record.key)
        if other != record.key:
            raise AsvError(
                f"{other} and {record.key} both become asv benchmark {name} on {record.device}; "
                "give one of them another name (test name or gpuperf.measure(name=...))"
            )
        m = record.measurement
        points.setdefault(name, {})[record.device] = Point.of(m.samples, m.iterations, started, m.sampling_seconds)
        described[name] = _describe(record)
        tests[name] = record.test.split("[")[0]
    return points, described, tests


def _describe(record: Record) -> str:
    """What the value is: time per step, and the work of one step, from which throughput follows."""
    work = ", ".join(f"{amount:.4g} {unit}" for unit, amount in record.measurement.work.items())
    return f"seconds per step, lower is better; work per step: {work}" if work else "seconds per call, lower is better"


def _write_benchmarks(
    path: Path,
    points: Mapping[str, Mapping[str, Point]],
    code: Mapping[str, str],
    pretty: Mapping[str, str],
    unit: str,
) -> None:
    entries: dict[str, Any] = {}
    if path.exists():
        entries = load_json(path, BENCHMARKS_API)
        entries.pop("version", None)
    for name, by_device in points.items():
        old = entries.get(name, {})
        known = [unrepr(p) for p in (old.get("params") or [[]])[0]] if old.get("version") == FORMAT else []
        devices = sorted(set(known) | set(by_device))
        entries[name] = {
            "code": code[name],
            "name": name,
            "param_names": ["device"],
            "params": [[repr(d) for d in devices]],
            "pretty_name": pretty[name],
            "timeout": 0,
            "type": "track",
            "unit": unit,
            "version": FORMAT,
        }
    write_json(path, {**dict(sorted(entries.items())), "version": BENCHMARKS_API})


def time_ms(created: str) -> int | None:
    """A run's ``created`` (ISO 8601, UTC where it names no zone) in milliseconds since the epoch, as asv stores
    times; None where it cannot be read."""
    try:
        when = dt.datetime.fromisoformat(created)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


class AsvTarget:
    """``--gpuperf-asv=DIR``: checked as the session starts (bad targets fail before measuring), written at the end."""

    def __init__(self, directory: Path, machine: str, commit: Commit) -> None:
        self.directory = directory
        self.machine = machine
        self.commit = commit

    @classmethod
    def prepare(cls, directory: Path, machine: str | None, root: Path) -> AsvTarget:
        problem = output_path_problem(
            directory, "", directory="the asv results directory (asv.conf.json's results_dir)"
        )
        if problem:
            raise AsvError(problem)
        name = machine_name(machine)
        return cls(directory, name, git_commit(root))

    def write(self, run: Run) -> str:
        """Write ``run``; return the line for the terminal summary."""
        path = write_results(self.directory, run, machine=self.machine, commit=self.commit)
        names = {benchmark_name(r) for r in run.records}
        dirty = " (the work tree had uncommitted changes)" if run.git.dirty else ""
        return (
            f"gpuperf: wrote asv results of {len(names)} benchmark(s) for commit {self.commit.hash[:8]}{dirty} "
            f"to {path} (time per step, lower is better)"
        )
