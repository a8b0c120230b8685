"""pytest-benchmark's JSON, both ways: a Run written as ``--benchmark-json`` writes it, and such a file read as a Run.

Written (``to_pytest_benchmark``): the schema pytest-benchmark 5 writes with ``--benchmark-json``
(``machine_info``, ``commit_info``, ``benchmarks``, ``datetime``, ``version``), one benchmark per
record, its ``stats`` computed from the record's samples with pytest-benchmark's own definitions
(quartiles, Tukey fences, outlier counts) and ``stats.data`` the samples themselves, in seconds per
call as pytest-benchmark keeps them. ``fullname`` is the record's key (its test's node id, plus
``::name`` when a test measures twice). What pytest-benchmark has no field for goes in keys it
ignores: the run's fingerprint in ``machine_info["gpuperf"]``, each record (without its samples,
which are ``stats.data``) in the benchmark's ``"gpuperf"``; so a file we wrote reads back as the
Run it came from (one written before ``params`` and ``extra_info`` took the form below too).
``params`` is the record's parameters as JSON values, null without any, as pytest-benchmark writes
a test without parameters; ``extra_info`` is what the test set (``benchmark.extra_info``) and ours
under one key, ``"gpuperf"`` (device, device name, the median's interval and its coverage, rates).

Read (``from_pytest_benchmark``): a file pytest-benchmark wrote becomes one Run whose records are
keyed by ``fullname``, the node id, which is the key a record of the same test gets when it
measures once without ``name=``, and whose params are the test's parameters as our records keep
them (each value's ``str``: ``_params``), so that they match ours of the same test. The gate
needs each run's samples, which pytest-benchmark keeps in ``stats.data``: ``--benchmark-json``
always writes them, ``--benchmark-save`` only with ``--benchmark-save-data``; a file without them
is refused with that fix. pytest-benchmark records neither the GPU, nor torch, nor the device of a
benchmark: those facts are absent from the Run (``Run.fingerprint.source`` says where it came
from), so the comparability rule refuses a GPU or torch it cannot check until ``--allow-mismatch``
names them; the records' device is ``unknown`` and their ``metadata["source"]`` says that their
device model, threads and work per call were not recorded (the gate then does not compare those).
"""

from __future__ import annotations

import math
import re
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..measuring import Measurement, Warmup
from ._digits import exported
from ._fingerprint import Fingerprint, GitState
from ._record import Evidence, Record, Run

__all__ = [
    "SOURCE",
    "from_pytest_benchmark",
    "is_pytest_benchmark",
    "pytest_benchmark_commit_info",
    "pytest_benchmark_machine_info",
    "pytest_benchmark_stats",
    "to_pytest_benchmark",
]

#: The pytest-benchmark release whose ``--benchmark-json`` schema the written files follow (its ``version``).
FORMAT_VERSION: Final = "5.1.0"
#: ``Run.fingerprint.source`` of a run read from a file pytest-benchmark wrote.
SOURCE: Final = "pytest-benchmark"
#: The device of a record read from pytest-benchmark, which does not record one.
UNKNOWN_DEVICE: Final = "unknown"


class PytestBenchmarkError(ValueError):
    """A pytest-benchmark file that cannot be read as a run; the message says what is missing and the fix."""


def is_pytest_benchmark(data: Any) -> bool:
    """Is ``data`` (parsed JSON) what pytest-benchmark writes: a ``benchmarks`` list beside ``machine_info``?"""
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list) and "machine_info" in data


# ------------------------------------------------------------------ statistics as pytest-benchmark defines them


def _quartiles(data: Sequence[float]) -> tuple[float, float]:
    """pytest-benchmark's Q1 and Q3 (stats.py: Method 3 for an odd count, Method 2 for an even one)."""
    n = len(data)
    if n == 1:
        return data[0], data[0]
    if n % 2:
        k, q = n // 4, n % 4
        if q == 1:
            return 0.25 * data[k - 1] + 0.75 * data[k], 0.75 * data[3 * k] + 0.25 * data[3 * k + 1]
        return 0.75 * data[k] + 0.25 * data[k + 1], 0.25 * data[3 * k + 1] + 0.75 * data[3 * k + 2]
    return statistics.median(data[: n // 2]), statistics.median(data[n // 2 :])


def pytest_benchmark_stats(samples: Sequence[float], iterations: int) -> dict[str, Any]:
    """The ``stats`` object pytest-benchmark writes for these per-call times, ``data`` and ``iterations`` included."""
    data = sorted(samples)
    n = len(data)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if n > 1 else 0.0
    q1, q3 = _quartiles(data)
    iqr = q3 - q1
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    stddev_outliers = sum(1 for x in data if x < mean - stddev or x > mean + stddev)
    iqr_outliers = sum(1 for x in data if x < low_fence or x > high_fence)
    total = math.fsum(data)
    return {
        "min": data[0],
        "max": data[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": n,
        "median": statistics.median(data),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": data[0] if n == 1 else data[bisect_left(data, low_fence)],
        "hd15iqr": data[0] if n == 1 else data[bisect_right(data, high_fence) - 1],
        "ops": n / total if total else 0,
        "total": total,
        "data": list(samples),
        "iterations": iterations,
    }


# ------------------------------------------------------------------ writing


#: The fingerprint's keys holding pytest-benchmark's ``machine_info`` and ``commit_info`` as a run of a suite with
#: pytest-benchmark's hooks made them (``plugin/_benchmark.py``); the export writes them back as they are.
MACHINE_INFO_KEY: Final = "machine_info"
COMMIT_INFO_KEY: Final = "commit_info"


def _exported_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """The statistics' figures to the digits every export keeps (``exported``); the samples (``data``) and the
    counts as they are."""
    return {name: exported(v) if isinstance(v, float) and name != "data" else v for name, v in stats.items()}


def pytest_benchmark_machine_info(fingerprint: Fingerprint) -> dict[str, Any]:
    """pytest-benchmark's ``machine_info`` of a run: the one its hooks made (the fingerprint's ``machine_info``),
    else the values pytest-benchmark writes on the machine measured on, where the fingerprint records them
    (``platform_info``; a run saved before it gets the system from ``platform`` and empty release and compiler)."""
    made = fingerprint.extra.get(MACHINE_INFO_KEY)
    if isinstance(made, Mapping):
        return dict(made)
    implementation = fingerprint.implementation or ""
    info = fingerprint.platform_info or {}
    return {
        "node": fingerprint.hostname,
        "processor": info.get("processor", fingerprint.machine),
        "machine": fingerprint.machine,
        "python_compiler": info.get("python_compiler", ""),
        "python_implementation": {"cpython": "CPython", "pypy": "PyPy"}.get(implementation, implementation),
        "python_implementation_version": fingerprint.python,
        "python_version": fingerprint.python,
        "python_build": [],
        "release": info.get("release", ""),
        "system": info.get("system", (fingerprint.platform or "").split("-", 1)[0]),
        "cpu": {
            "brand_raw": fingerprint.cpu_model,
            "count": fingerprint.cpu_count,
            "arch_string_raw": fingerprint.machine,
        },
    }


def pytest_benchmark_commit_info(fingerprint: Fingerprint) -> dict[str, Any]:
    """pytest-benchmark's ``commit_info`` of a run: the one its hooks made (the fingerprint's ``commit_info``), else
    the one derived from the fingerprint's git state."""
    made = fingerprint.extra.get(COMMIT_INFO_KEY)
    if isinstance(made, Mapping):
        return dict(made)
    git = fingerprint.git if fingerprint.git is not None else GitState()
    return {
        "id": git.commit or "unversioned",
        "time": None,
        "author_time": None,
        "dirty": bool(git.dirty),
        "project": None,
        "branch": git.branch or "(unknown)",
    }


def _json_value(text: str) -> Any:
    """A parameter as the JSON value pytest-benchmark writes for it: the record keeps each as ``str(value)``, so
    an int, a float, a bool or None is read back from that text; any other value stays its text."""
    special: dict[str, Any] = {"True": True, "False": False, "None": None}
    if text in special:
        return special[text]
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        if str(value) == text and math.isfinite(value):  # "1e3", " 7" or "nan" stay text: not what str() wrote
            return value
    return text


def pytest_benchmark_params(record: Record) -> dict[str, Any] | None:
    """pytest-benchmark's ``params``: the test's parameters by name with JSON values; null for a test without any,
    as pytest-benchmark writes it (the device measured on is in ``extra_info["gpuperf"]``, and a parameter only
    where the test has one of that name)."""
    if not record.params:
        return None
    return {str(name): _json_value(str(value)) for name, value in record.params.items()}


#: The one key of a benchmark's ``extra_info`` that is ours: the rest is what the test set.
EXTRA_INFO_KEY: Final = "gpuperf"


def _benchmark(record: Record) -> dict[str, Any]:
    m = record.measurement
    path, bracket, params = record.test.partition("[")
    node_name = path.split("::")[-1] + (bracket + params if bracket else "")
    suffix = record.key[len(record.test) :]  # "::name" when a test measures more than once
    metadata = record.metadata
    extra_info = dict(metadata.get("extra_info") or {}) if isinstance(metadata.get("extra_info"), Mapping) else {}
    ours = record.to_dict()
    ours["measurement"] = {k: v for k, v in ours["measurement"].items() if k != "samples"}
    return {
        "group": metadata.get("group") if isinstance(metadata.get("group"), str) else None,
        "name": node_name + suffix,
        "fullname": record.key,
        "params": pytest_benchmark_params(record),
        "param": params.removesuffix("]") if bracket else None,
        "extra_info": {
            **extra_info,
            EXTRA_INFO_KEY: {
                "device": record.device,
                "device_name": m.device_name,
                "median_ci": [exported(m.ci.low), exported(m.ci.high)],
                "median_ci_confidence": exported(m.ci.confidence),
                **{f"{unit}/s": exported(m.work[unit] / m.median) for unit in m.work},
            },
        },
        "options": {
            "timer": m.timer or None,
            "warmup": m.warmup.calls > 0,
            "mode": m.mode,
            "target": m.target,
            "stop_reason": m.stop_reason,
        },
        "stats": _exported_stats(pytest_benchmark_stats(m.samples, m.iterations)),
        "gpuperf": ours,
    }


def to_pytest_benchmark(run: Run) -> dict[str, Any]:
    """``run`` as pytest-benchmark's ``--benchmark-json`` writes a session (see the module docstring)."""
    return {
        "machine_info": {**pytest_benchmark_machine_info(run.fingerprint), "gpuperf": run.fingerprint.to_dict()},
        "commit_info": pytest_benchmark_commit_info(run.fingerprint),
        "benchmarks": [_benchmark(record) for record in run.records],
        "datetime": run.created,
        "version": FORMAT_VERSION,
    }


# ------------------------------------------------------------------ reading


def _fingerprint(data: Mapping[str, Any]) -> Fingerprint:
    info = data.get("machine_info") if isinstance(data.get("machine_info"), Mapping) else {}
    commit = data.get("commit_info") if isinstance(data.get("commit_info"), Mapping) else {}
    assert isinstance(info, Mapping) and isinstance(commit, Mapping)
    ours = info.get("gpuperf")
    if isinstance(ours, Mapping):  # written by to_pytest_benchmark: the run's own fingerprint
        return Fingerprint.from_dict(ours)
    cpu = info.get("cpu") if isinstance(info.get("cpu"), Mapping) else {}
    assert isinstance(cpu, Mapping)
    implementation = info.get("python_implementation")
    git: dict[str, Any] = {}
    if commit.get("id") not in (None, "", "unversioned", "unknown"):
        git = {"commit": str(commit["id"]), "branch": commit.get("branch"), "dirty": bool(commit.get("dirty"))}
    system, release = info.get("system"), info.get("release")
    # Built as the stored form, in its key order and with its nulls (a file read and exported again is the same).
    return Fingerprint.from_dict(
        {
            "source": SOURCE,
            "python": info.get("python_version"),
            "implementation": str(implementation).lower() if implementation else None,
            "platform": "-".join(str(x) for x in (system, release) if x) or None,
            "machine": info.get("machine"),
            "hostname": info.get("node"),
            "cpu_model": cpu.get("brand_raw"),
            "cpu_count": cpu.get("count"),
            "git": git,
            "platform_info": {
                name: str(info[name]) for name in ("system", "release", "processor", "python_compiler") if name in info
            },
        }
    )


def _samples(bench: Mapping[str, Any], where: str) -> tuple[float, ...]:
    stats = bench.get("stats")
    if not isinstance(stats, Mapping):
        raise PytestBenchmarkError(f'{where} has no "stats"; write the file again with pytest --benchmark-json=PATH')
    data = stats.get("data")
    if not isinstance(data, list) or not data:
        raise PytestBenchmarkError(
            f'{where} has summary statistics but not the time of each round ("stats.data"), and the gate judges '
            "runs by their rounds: pytest-benchmark writes them with --benchmark-json=PATH, and with "
            "--benchmark-save only when --benchmark-save-data is given too; save the baseline again with one of those"
        )
    try:
        samples = tuple(float(x) for x in data)
    except (TypeError, ValueError):
        raise PytestBenchmarkError(f'{where} has a "stats.data" entry that is not a number; write it again') from None
    if not all(math.isfinite(x) and x > 0 for x in samples):
        raise PytestBenchmarkError(f'{where} has "stats.data" times that are not positive and finite; write it again')
    return samples


def _measurement(bench: Mapping[str, Any], name: str, samples: tuple[float, ...]) -> Measurement:
    stats = bench["stats"]
    options = bench.get("options") if isinstance(bench.get("options"), Mapping) else {}
    assert isinstance(options, Mapping)
    iterations = stats.get("iterations")
    return Measurement(
        name=name,
        device=UNKNOWN_DEVICE,
        device_name="",
        samples=samples,
        iterations=int(iterations) if isinstance(iterations, int) and iterations > 0 else 1,
        warmup=Warmup(0, 0, 0.0, False, ()),
        converged=False,
        stop_reason=f"pytest-benchmark: {len(samples)} rounds",
        sampling_seconds=math.fsum(samples) * (int(iterations) if isinstance(iterations, int) else 1),
        target=0.0,
        confidence=0.95,
        timer=str(options.get("timer") or ""),
    )


def _record(bench: Any, index: int, path: Path) -> Record:
    if not isinstance(bench, Mapping) or not isinstance(bench.get("fullname") or bench.get("name"), str):
        raise PytestBenchmarkError(f"benchmark {index + 1} has no fullname or name; write the file again")
    key = str(bench.get("fullname") or bench.get("name"))
    samples = _samples(bench, f"benchmark {key}")
    ours = bench.get("gpuperf")
    if isinstance(ours, Mapping) and isinstance(ours.get("measurement"), Mapping):
        # written by to_pytest_benchmark: the record itself, its samples from stats.data
        try:
            return Record.from_dict({**ours, "measurement": {**ours["measurement"], "samples": list(samples)}})
        except ValueError as exc:  # measuring.values.FieldError: its field, and what it must be
            raise PytestBenchmarkError(f'benchmark {key}: its "gpuperf" record\'s {exc}') from None
    metadata: dict[str, Any] = {"source": SOURCE}
    for name in ("group", "extra_info"):
        if bench.get(name):
            metadata[name] = bench[name]
    return Record(
        test=key,
        device=UNKNOWN_DEVICE,
        measurement=_measurement(bench, key, samples),
        params=_params(bench, key),
        metadata=metadata,
        evidence=Evidence(),
    )


#: What pytest-benchmark writes for a parameter that JSON cannot hold: ``UNSERIALIZABLE[<its repr>]``.
_UNSERIALIZABLE: Final = re.compile(r"UNSERIALIZABLE\[(.*)\]", re.DOTALL)


def _params(bench: Mapping[str, Any], key: str) -> dict[str, str]:
    """The test's parameters as our records keep them, each the ``str`` of its value: pytest-benchmark writes the
    value itself where JSON holds it (a number, a string, a bool, None; a list or dict of them), read back here as
    that value, and else its repr, which is its ``str`` for most values (a torch dtype); null without any."""
    params = bench.get("params")
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise PytestBenchmarkError(f'benchmark {key} has "params" that are not an object of names; write it again')
    out = {}
    for name, value in params.items():
        unserializable = _UNSERIALIZABLE.fullmatch(value) if isinstance(value, str) else None
        out[str(name)] = unserializable.group(1) if unserializable else str(value)
    return out


def from_pytest_benchmark(path: Path, data: Mapping[str, Any]) -> Run:
    """The run in a pytest-benchmark JSON file (see the module docstring); PytestBenchmarkError says what is wrong."""
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise PytestBenchmarkError('its "benchmarks" list is empty: pytest-benchmark measured nothing in that session')
    records = [_record(bench, i, path) for i, bench in enumerate(benchmarks)]
    keys = [r.key for r in records]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise PytestBenchmarkError(f"it holds {', '.join(twice)} more than once; give one session's file")
    return Run(
        created=str(data.get("datetime") or ""),
        fingerprint=_fingerprint(data),
        settings={},
        records=records,
    )
