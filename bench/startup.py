"""What the plugin costs a session: 500 trivial tests with and without it, and what a test that measures a trivial
step costs beyond its measurement, part by part.

    python bench/startup.py [--tests 500] [--repeats 7] [--measured 200] [--plugin MODULE]

Start-up: runs ``python -m pytest -q -p no:randomly -p no:cacheprovider`` on a generated file of
trivial tests, alternating a run with the plugin loaded and one with ``-p no:gpuperf``,
``--repeats`` times each, and prints the median wall time and CPU time (the session's user +
system time) of each and their ratios. The runs alternate so that a change in the machine's
speed falls on both alike, and the median of the pairs' CPU ratios with its distribution-free interval (at the
coverage the pairs give: 95% needs six). Also prints what importing the plugin costs a process that has
imported pytest already (median of ``--repeats`` fresh processes, CPU time) and how many of
the package's modules that import loads.

Per test: ``--measured`` tests that each measure ``lambda: None`` (``gpuperf.measure``) at
``--gpuperf-max-time=0.02`` on the CPU, and a fifth as many, ``--repeats`` sessions of each
size and kind, alternating (0 leaves the part out). The kinds: the defaults, the same with
``--gpuperf-profile=off``, and ``-p no:gpuperf`` with a ``gpuperf`` fixture that only calls
the step (pytest's own cost of such a test). A conftest imports torch first (the plugin's
import of it is once a session) and times each phase in the process's CPU time: collection,
each test's setup (its fixtures), its measurement (first call, warmup and samples, through a
reading registered for it: ``bench/measurement_parts.py``'s ``timed_parts``), the memory
probe (on a CPU with the work profile's calls riding on it), reading the work profile, the
rest of its call (the Measurement, the record, the load monitor), its teardown and report,
and the end of the session (the run file, the results table, pytest's summary). A test's
phase is the median over the tests of a session, then over the sessions; collection and the
end are the session's, per test from the two sizes' difference (what a session does once
is printed apart). The whole sessions check the sum: the CPU time a test adds to a session
(user + system, from the two sizes' difference) less its measurement's mean. Bytecode is
written and read as in a user's run (``PYTHONDONTWRITEBYTECODE`` is dropped for the sessions).

``--plugin MODULE`` loads the plugin from that module instead of the installed entry
point (``-p no:gpuperf -p MODULE``), to measure another version: for the version before
the redesign, ``PYTHONPATH=<its checkout> python bench/startup.py --plugin pytest_gpuperf.plugin``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
BENCH = Path(__file__).resolve().parent
#: The measured tests' budget: the issue's ``max_time`` (issue 37), with a ``min_time`` under it.
BUDGET = ("--gpuperf-device=cpu", "--gpuperf-max-time=0.02", "--gpuperf-min-time=0.01")
#: The phases of a measured test, as the conftest names them, and their lines in the table.
PHASES = {
    "collection": "collection",
    "setup": "setup: the fixtures, the plugin's setup hook",
    "sample": "the measurement: first call, warmup, samples",
    "peak_memory": "the memory probe (the work profile's calls ride on it)",
    "work_profile": "reading the work profile",
    "call_rest": "the rest of the call: Measurement, record, load monitor",
    "report": "teardown and report",
    "end": "end of the session: run file, table, summary",
}
BEYOND = [phase for phase in PHASES if phase != "sample"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _session(directory: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one pytest session."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [*BASE, *extra], cwd=directory, capture_output=True, text=True, check=False, env=env or _env()
    )
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"pytest failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return took, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


_IMPORT = """
import sys, time
import pytest
start = time.process_time()
import {module}
took = time.process_time() - start
print(took, len([name for name in sys.modules if name.startswith("pytest_gpuperf")]))
"""


def _plugin_import(module: str, repeats: int) -> tuple[float, int]:
    """Median CPU seconds to import the plugin after pytest, and how many of the package's modules it loads."""
    code = _IMPORT.format(module=module)
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_env()
        ).stdout.split()
        for _ in range(repeats)
    ]
    return statistics.median(float(r[0]) for r in runs), int(runs[0][1])


def _times(label: str, runs: list[tuple[float, float]]) -> str:
    wall, cpu = (statistics.median(r[i] for r in runs) for i in (0, 1))
    each = ", ".join(f"{r[1]:.2f}" for r in runs)
    return f"  {label:21} median {wall:.3f} s wall, {cpu:.3f} s CPU  (CPU of each: {each})"


def _paired_ratio(loaded: list[tuple[float, float]], without: list[tuple[float, float]]) -> str:
    """The median of each pair's CPU ratio (a session with the plugin over the one without it that followed it, so
    that a change of load between pairs cancels) and its distribution-free interval, at the coverage the pairs give."""
    from pytest_gpuperf.measuring import median_ci

    pairs = [a[1] / b[1] for a, b in zip(loaded, without, strict=True)]
    ci = median_ci(pairs)
    if len(pairs) < 2:
        return f"paired CPU ratio: {pairs[0]:.3f} from one pair (a point, not an interval)"
    return (
        f"paired CPU ratio: median {statistics.median(pairs):.3f}, {ci.confidence:.0%} interval "
        f"[{ci.low:.3f}, {ci.high:.3f}] from {len(pairs)} pairs"
    )


def startup(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="gpuperf-startup-") as tmp:
        directory = Path(tmp)
        (directory / "pytest.ini").write_text("[pytest]\n")
        body = "".join(f"def test_{i}():\n    assert {i} + 1 > {i}\n\n\n" for i in range(args.tests))
        (directory / "test_trivial.py").write_text(body)
        plugin = ["-p", "no:gpuperf", "-p", args.plugin] if args.plugin else []
        _session(directory, *plugin)  # warm the file system and the bytecode caches
        _session(directory, "-p", "no:gpuperf")
        loaded: list[tuple[float, float]] = []
        without: list[tuple[float, float]] = []
        for _ in range(args.repeats):
            loaded.append(_session(directory, *plugin))
            without.append(_session(directory, "-p", "no:gpuperf"))
    print(f"{args.tests} trivial tests, {args.repeats} sessions each, alternating:")
    print(_times("with pytest-gpuperf:", loaded))
    print(_times("with -p no:gpuperf:", without))
    ratios = [statistics.median(r[i] for r in loaded) / statistics.median(r[i] for r in without) for i in (0, 1)]
    print(f"  ratio: {ratios[0]:.3f} wall, {ratios[1]:.3f} CPU")
    print(f"  {_paired_ratio(loaded, without)}")
    seconds, modules = _plugin_import(args.plugin or "pytest_gpuperf.plugin.entry", args.repeats)
    print(f"  importing the plugin after pytest: {seconds * 1e3:.1f} ms CPU median, {modules} of its modules loaded")


#: The phase timer, a conftest beside the measured tests; where the plugin is blocked (``GPUPERF_BENCH_BARE``), a
#: ``gpuperf`` fixture that only calls the step.
_CONFTEST = """
import json, os, sys, time
import pytest

import torch  # first, in every session: the plugin's import of it, at collection, is once a session

clock = time.process_time
tests, session = [], {"collection": 0.0, "end": 0.0}
bare = bool(os.environ.get("GPUPERF_BENCH_BARE"))
if bare:
    class _Calls:
        def measure(self, fn, **settings):
            fn()

    @pytest.fixture
    def gpuperf():
        return _Calls()
else:
    sys.path.insert(0, BENCH)
    from measurement_parts import timed_parts


def _timed(into, name):
    start = clock()
    try:
        return (yield)
    finally:
        into[name] = into.get(name, 0.0) + clock() - start


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection(session):
    return (yield from _timed(globals()["session"], "collection"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item):
    tests.append({})
    return (yield from _timed(tests[-1], "protocol"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    return (yield from _timed(tests[-1], "setup"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    if bare:
        return (yield from _timed(tests[-1], "call"))
    with timed_parts(tests[-1], clock):
        return (yield from _timed(tests[-1], "call"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    try:
        return (yield)
    finally:
        globals()["session"]["loop_end"] = clock()


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    session["end"] = clock() - session.pop("loop_end", clock())
    with open(os.environ["GPUPERF_BENCH_PARTS"], "w") as f:
        json.dump({"session": session, "tests": tests}, f)
"""


def _parts(path: Path) -> dict[str, float]:
    """One session's phases: each test's, the median over its tests; collection and the end, the session's."""
    found = json.loads(path.read_text())
    tests: list[dict[str, float]] = found["tests"]
    for t in tests:
        t["report"] = t["protocol"] - t.get("setup", 0.0) - t.get("call", 0.0)
        t["call_rest"] = t.get("call", 0.0) - sum(t.get(k, 0.0) for k in ("sample", "peak_memory", "work_profile"))
    out = {k: statistics.median(t.get(k, 0.0) for t in tests) for k in PHASES if k not in ("collection", "end")}
    out.update({k: found["session"][k] for k in ("collection", "end")})
    out["sample_mean"] = statistics.fmean(t.get("sample", 0.0) for t in tests)
    return out


def per_test(args: argparse.Namespace) -> None:
    big, small = args.measured, max(1, args.measured // 5)
    plugin = ["-p", "no:gpuperf", "-p", args.plugin] if args.plugin else []
    with tempfile.TemporaryDirectory(prefix="gpuperf-per-test-") as tmp:
        root = Path(tmp)
        for n in (big, small):
            d = root / f"n{n}"
            d.mkdir()
            (d / "pytest.ini").write_text("[pytest]\n")
            (d / "conftest.py").write_text(f"BENCH = {str(BENCH)!r}\n{_CONFTEST}")
            body = "".join(f"def test_{i}(gpuperf):\n    gpuperf.measure(lambda: None)\n\n\n" for i in range(n))
            (d / "test_measured.py").write_text(body)
        parts_file = root / "parts.json"
        measured = {**_env(), "GPUPERF_BENCH_PARTS": str(parts_file)}
        kinds = {
            "defaults": ([*plugin, *BUDGET], measured),
            "profile off": ([*plugin, *BUDGET, "--gpuperf-profile=off"], measured),
            "pytest alone": (["-p", "no:gpuperf"], {**measured, "GPUPERF_BENCH_BARE": "1"}),
        }
        _session(root / f"n{small}", *kinds["defaults"][0], env=measured)  # warm the caches
        cpu: dict[tuple[str, int], list[float]] = {(kind, n): [] for kind in kinds for n in (big, small)}
        parts: dict[tuple[str, int], list[dict[str, float]]] = {key: [] for key in cpu}
        load = os.getloadavg()[0]
        for _ in range(args.repeats):
            for kind, n in cpu:
                options, env = kinds[kind]
                cpu[kind, n].append(_session(root / f"n{n}", *options, env=env)[1])
                parts[kind, n].append(_parts(parts_file))
    print(
        f"{big} tests measuring lambda: None ({' '.join(BUDGET)}), {args.repeats} sessions of each kind, and as "
        f"many of {small} such tests, alternating; CPU ms per test (load average {load:.2f} -> "
        f"{os.getloadavg()[0]:.2f}):"
    )
    print(f"  {'':58} {'':>8}" + "".join(f"{kind:>14}" for kind in kinds))
    table: dict[str, dict[str, float]] = {}
    for kind in kinds:
        mid = table[kind] = {k: statistics.median(p[k] for p in parts[kind, big]) for k in (*PHASES, "sample_mean")}
        # What a session does once (the device probe, the fingerprint, imports) is left out: the sizes' difference.
        for k in ("collection", "end"):
            ones = {n: statistics.median(p[k] for p in parts[kind, n]) for n in (big, small)}
            mid[k] = (ones[big] - ones[small]) / (big - small)
            mid[f"{k} once"] = ones[small] - mid[k] * small
        mid["sum"] = sum(mid[k] for k in BEYOND)
        added = (statistics.median(cpu[kind, big]) - statistics.median(cpu[kind, small])) / (big - small)
        mid["whole"] = added - mid["sample_mean"]
    rows = {
        **PHASES,
        "sum": "beyond the measurement: the sum of the parts",
        "whole": "beyond the measurement: from the whole sessions",
    }
    for key, label in rows.items():
        cells = "".join(f"{table[kind][key] * 1e3:14.2f}" for kind in kinds)
        print(f"  {label:67}{cells}{'  (not counted)' if key == 'sample' else ''}")
    once = "".join(
        f"{table[kind]['collection once'] * 1e3:7.0f} +{table[kind]['end once'] * 1e3:5.0f}" for kind in kinds
    )
    print(f"  {'once a session, ms: collection + the end':67}{once}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tests", type=int, default=500, help="trivial tests in the session (default: 500)")
    parser.add_argument("--repeats", type=int, default=7, help="sessions of each kind (default: 7)")
    parser.add_argument(
        "--measured", type=int, default=200, help="tests measuring a trivial step (default: 200; 0: none)"
    )
    parser.add_argument("--plugin", default=None, help="load the plugin from this module, not the entry point")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    startup(args)
    if args.measured:
        per_test(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
