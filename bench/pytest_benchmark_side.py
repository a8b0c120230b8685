"""pytest-benchmark and pytest-gpuperf side by side on the same unchanged suites, on the CPU.

    python bench/pytest_benchmark_side.py [--suite toy|pint] [--select EXPR] [--repeats 3]
        [--ours NAME=ARGS ...] [--threads 1] [--quick] [--keep DIR]

Runs a suite written for pytest-benchmark under pytest-benchmark (``-p no:gpuperf
--benchmark-json``) and under pytest-gpuperf's ``benchmark`` fixture (``-p no:benchmark
--gpuperf-json``), each tool in a subprocess, ``--repeats`` sessions of each, alternating
session by session (the order of the tools reversed every other round), so that both see
the same load; the load average is read before and after every session.

Suites:

- ``toy`` (the default): two suites written into a temporary directory: a TorchBench-style
  one (a class marked ``@pytest.mark.benchmark(warmup=True, warmup_iterations=3,
  disable_gc=False, timer=time.perf_counter, group="hub")``, ``device`` parametrized at class
  scope, ``benchmark(task.invoke)`` then ``extra_info``) and a pybench-style one
  (``benchmark.pedantic(run_sync, args=(...), rounds=5)``), with small torch workloads;
- ``pint``: the real suite that pint ships in its wheel (``pint/testsuite/benchmarks``,
  ``pytest --pyargs pint.testsuite.benchmarks``), 450 tests, of which ``--select`` (a ``-k``
  expression; ``all`` for every test) picks a part: by default 40 tests of every kind it
  has, from 5 us tokenizers to a 0.1 s registry creation and a 0.17 s subprocess. Needs
  ``pip install pint`` (the script says so and exits 2 where pint is absent).

pytest-gpuperf runs with its defaults, and once more per ``--ours NAME=ARGS`` (for example
``--ours "quick=--gpuperf-target=5% --gpuperf-max-time=1"``; leading ``VAR=VALUE`` words set
environment variables, ``--ours "main=PYTHONPATH=/tmp/main-src"`` runs another checkout's
plugin), each a tool of its own in the alternation. Prints, per test, each tool's median
(the median of its sessions' medians) and the ratio to pytest-benchmark's; per tool, its
wall time per session, its run-to-run **spread** (per test, half the range of its sessions'
medians relative to their median; the suite's figure is the median of that over the tests,
its 90th percentile beside it: the precision a tool actually achieves from one session to
the next, not a confidence interval), the geometric mean of its ratios, and for pytest-
gpuperf where its time went (first calls, warmup, samples, the work profile; the rest is the
memory probe, per-test setup, collection and the session's start).

Both processes run torch with ``--threads`` intra-op threads (``OMP_NUM_THREADS``, and
``--gpuperf-threads=torch`` so that pytest-gpuperf keeps them): the tools then differ in
how they time, not in what they run. ``--quick`` shortens every tool's budget (a smoke
run, ``tests/test_bench.py``); its figures mean little.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TORCHBENCH = """
import time

import pytest
import torch


def pytest_generate_tests(metafunc):
    if metafunc.cls and metafunc.cls.__name__ == "TestBenchNetwork":
        metafunc.parametrize("model_path", ["mlp", "conv", "matmul"], scope="class")
        metafunc.parametrize("device", ["cpu"], scope="class")


class ModelTask:
    def __init__(self, model_path, device):
        torch.manual_seed(0)
        if model_path == "mlp":
            self.model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
            self.example = torch.randn(64, 256, device=device)
        elif model_path == "conv":
            self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3))
            self.example = torch.randn(8, 3, 32, 32, device=device)
        else:
            self.model = None
            self.example = torch.randn(256, 256, device=device)
        if self.model is not None:
            self.model.to(device)

    def invoke(self):
        if self.model is None:
            return self.example @ self.example
        return self.model(self.example)


@pytest.mark.benchmark(
    warmup=True,
    warmup_iterations=3,
    disable_gc=False,
    timer=time.perf_counter,
    group="hub",
)
class TestBenchNetwork:
    def test_eval(self, model_path, device, benchmark):
        task = ModelTask(model_path, device)
        with torch.no_grad():
            benchmark(task.invoke)
        benchmark.extra_info["machine_info"] = "cpu"
"""

PYBENCH = """
import torch


def run_sync(a, b):
    return (a @ b).sum().item()


def softmax_sync(x):
    return torch.softmax(x, dim=-1).max().item()


def test_matmul_128(benchmark):
    a = torch.randn(128, 128)
    benchmark.pedantic(run_sync, args=(a, a), rounds=5)


def test_matmul_384(benchmark):
    a = torch.randn(384, 384)
    benchmark.pedantic(run_sync, args=(a, a), rounds=5)


def test_softmax(benchmark):
    x = torch.randn(256, 1024)
    benchmark.pedantic(softmax_sync, args=(x,), rounds=5)
"""

BASE = ("-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist")
THEIRS = "pytest-benchmark"
#: pint's benchmarks picked by default: every kind the suite has (tokenizers of 5 to 18 us, registry look-ups,
#: quantity arithmetic, registries built in 50 us to 0.1 s, an import timed in a subprocess), 40 of its 450 tests.
PINT_SELECT = (
    "test_00_common or test_01_eval or test_05_registry_creation or test_build_cache or test_load_definitions "
    "or test_parse_math_expression or test_convert_from_uc or (test_20_quantity and (test_build_by_mul or test_op1))"
)


@dataclass
class Session:
    """One pytest session of one tool: its wall time, the load average around it, and its medians by test."""

    wall: float
    load: tuple[float, float]
    medians: dict[str, float]
    counts: dict[str, str]
    #: pytest-gpuperf's: seconds of first calls, warmup after them, samples and work profiles, summed over records
    parts: dict[str, float] = field(default_factory=dict)


@dataclass
class Tool:
    name: str
    args: list[str]
    #: environment variables set for its sessions (``--ours "main=PYTHONPATH=/tmp/main-src"``: another checkout)
    env: dict[str, str] = field(default_factory=dict)
    sessions: list[Session] = field(default_factory=list)

    @property
    def ours(self) -> bool:
        return self.name != THEIRS

    def median(self, test: str) -> float | None:
        values = [s.medians[test] for s in self.sessions if test in s.medians]
        return statistics.median(values) if values else None

    def spread(self, test: str) -> float | None:
        """Half the range of the test's session medians relative to their median (None from fewer than 2)."""
        values = [s.medians[test] for s in self.sessions if test in s.medians]
        if len(values) < 2:
            return None
        return (max(values) - min(values)) / 2 / statistics.median(values)


def run_tool(
    directory: Path, args: list[str], threads: int, extra_env: dict[str, str]
) -> tuple[float, tuple[float, float]]:
    """Run pytest in ``directory``; its wall seconds (the whole process, start to exit) and the 1-minute load average
    before and after it."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTEST_ADDOPTS": "", **extra_env}
    env.pop("PYTEST_XDIST_WORKER", None)  # pytest-benchmark turns itself off in what looks like an xdist worker
    before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *BASE, *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        output = done.stdout[-3000:] + done.stderr[-3000:]
        raise SystemExit(f"pytest {' '.join(args)} failed ({done.returncode}):\n{output}")
    return took, (before, os.getloadavg()[0])


def pytest_benchmark_medians(path: Path) -> tuple[dict[str, float], dict[str, str]]:
    """test node id -> median seconds per call, and -> rounds x iterations, from pytest-benchmark's JSON."""
    data = json.loads(path.read_text())
    medians = {b["fullname"]: float(b["stats"]["median"]) for b in data["benchmarks"]}
    counts = {b["fullname"]: f"{b['stats']['rounds']}x{b['stats']['iterations']}" for b in data["benchmarks"]}
    return medians, counts


def gpuperf_medians(path: Path) -> tuple[dict[str, float], dict[str, str], dict[str, float]]:
    """test node id -> median seconds per call, and -> samples x iterations and 95% CI, from pytest-gpuperf's
    results file; and the seconds its records spent in first calls, warmup after them, samples and profiles."""
    from pytest_gpuperf.results import load_run

    medians, counts = {}, {}
    parts = dict.fromkeys(("first calls", "warmup", "samples", "work profile"), 0.0)
    for record in load_run(path).records:
        m = record.measurement
        medians[record.test] = m.median
        counts[record.test] = f"{len(m.samples)}x{m.iterations} {m.ci_text}"
        first = m.warmup.block_times[0] if m.warmup.block_times else 0.0
        parts["first calls"] += first
        parts["warmup"] += max(m.warmup.seconds - first, 0.0)
        parts["samples"] += m.sampling_seconds
        parts["work profile"] += m.profile.seconds if m.profile is not None else 0.0
    return medians, counts, parts


def fmt(seconds: float) -> str:
    from pytest_gpuperf.measuring import format_duration

    return format_duration(seconds)


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile by the nearest rank (a few dozen tests: no interpolation to explain)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def parse_ours(raw: str) -> Tool:
    """``NAME=[VAR=VALUE ...] ARGS``: pytest-gpuperf with these options, and these environment variables."""
    name, sep, rest = raw.partition("=")
    if not sep or not name or name == THEIRS:
        raise SystemExit(f"--ours {raw!r}: write NAME=ARGS, such as 'quick=--gpuperf-target=5%'")
    words = shlex.split(rest)
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return Tool(f"gpuperf {name}", words, env)


def suite_args(options: argparse.Namespace, directory: Path) -> list[str]:
    """Write the toy suites into ``directory``, or name pint's installed one; pytest's arguments that select it."""
    if options.suite == "pint":
        if importlib.util.find_spec("pint") is None:
            print("--suite pint needs pint installed: pip install pint", file=sys.stderr)
            raise SystemExit(2)
        select = [] if options.select == "all" else ["-k", options.select]
        return ["--pyargs", "pint.testsuite.benchmarks", *select]
    (directory / "test_torchbench.py").write_text(TORCHBENCH)
    (directory / "test_pybench.py").write_text(PYBENCH)
    return ["-k", options.select] if options.select else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--suite", choices=("toy", "pint"), default="toy", help="the suite to run (default toy)")
    parser.add_argument("--select", help=f"a -k expression (pint's default: {PINT_SELECT}; 'all': every test)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads in both tools (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="sessions of each tool, alternating (default 3)")
    parser.add_argument(
        "--ours", action="append", default=[], help="one more pytest-gpuperf tool: NAME=ARGS (its extra options)"
    )
    parser.add_argument("--quick", action="store_true", help="short budgets: a smoke run whose figures mean little")
    parser.add_argument("--keep", type=Path, help="write the suites and JSON files here instead of a temporary dir")
    options = parser.parse_args()
    if options.suite == "pint" and options.select is None:
        options.select = PINT_SELECT
    theirs = Tool(THEIRS, ["-p", "no:gpuperf", "--benchmark-json=pytest-benchmark.json"])
    tools = [theirs, Tool("gpuperf default", []), *(parse_ours(raw) for raw in options.ours)]
    for tool in tools[1:]:
        tool.args = ["-p", "no:benchmark", "--gpuperf-json=gpuperf.json", "--gpuperf-threads=torch", *tool.args]
        if options.quick:
            tool.args += ["--gpuperf-max-time=0.2", "--gpuperf-warmup-time=0.05", "--gpuperf-min-time=0.02"]
    if options.quick:
        theirs.args += ["--benchmark-max-time=0.05"]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        directory = options.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        selection = suite_args(options, directory)
        for round_ in range(options.repeats):
            # Alternating, the order reversed every other round, so that a change in the machine's speed falls on
            # every tool alike.
            for tool in tools if round_ % 2 == 0 else tools[::-1]:
                wall, load = run_tool(directory, [*selection, *tool.args], options.threads, tool.env)
                if tool.ours:
                    medians, counts, parts = gpuperf_medians(directory / "gpuperf.json")
                else:
                    (medians, counts), parts = pytest_benchmark_medians(directory / "pytest-benchmark.json"), {}
                tool.sessions.append(Session(wall, load, medians, counts, parts))
                print(
                    f"round {round_ + 1} {tool.name:24} {wall:7.1f} s  load average {load[0]:.2f} -> {load[1]:.2f}",
                    flush=True,
                )
    report(options, tools, time.perf_counter() - began)
    return 0


def report(options: argparse.Namespace, tools: list[Tool], took: float) -> None:
    theirs, ours = tools[0], tools[1:]
    loads = [x for tool in tools for s in tool.sessions for x in s.load]
    import torch

    print()
    print(
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__} threads {options.threads}, suite {options.suite}"
        f"{f' -k {options.select!r}' if options.select else ''}, {options.repeats} sessions of each tool, "
        f"alternating{', quick budgets' if options.quick else ''}; load average {min(loads):.2f} to {max(loads):.2f}; "
        f"{took / 60:.1f} min in all"
    )
    for tool in ours:
        env = " ".join(f"{k}={v}" for k, v in tool.env.items())
        print(f"{tool.name}: {env + ' ' if env else ''}{' '.join(tool.args[4:]) or '(defaults)'}")
    tests = sorted(theirs.sessions[-1].medians)
    print()
    print("median per call: the median over the sessions of each session's median (samples of the last session);")
    print("spread: half the range of a test's session medians, relative to their median")
    header = f"{'test':64} {THEIRS:>24} {'spread':>7}" + "".join(
        f" {tool.name:>34} {'spread':>7} {'ratio':>6}" for tool in ours
    )
    print(header)
    print("-" * len(header))
    ratios: dict[str, list[float]] = {tool.name: [] for tool in ours}
    for test in tests:
        base = theirs.median(test)
        if base is None:
            continue
        line = f"{test[-64:]:64} {fmt(base):>10} ({theirs.sessions[-1].counts[test]:>10}) {_pct(theirs.spread(test))}"
        for tool in ours:
            mine = tool.median(test)
            if mine is None:
                line += f" {'not measured':>34} {'':7} {'':6}"
                continue
            ratio = mine / base
            ratios[tool.name].append(ratio)
            shown = f"{fmt(mine)} ({tool.sessions[-1].counts.get(test, '')})"
            line += f" {shown:>34} {_pct(tool.spread(test))} {ratio:6.3f}"
        print(line)
    print()
    header = f"{'tool':24} {'wall per session':>18} {'sessions':>28} {'spread: median':>15} {'p90':>7} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for tool in tools:
        walls = [s.wall for s in tool.sessions]
        spreads = [x for x in (tool.spread(t) for t in tests) if x is not None]
        mid = f"{statistics.median(spreads):.2%}" if spreads else "-"
        p90 = f"{percentile(spreads, 0.9):.2%}" if spreads else "-"
        shown_ratio = f"{geomean(ratios[tool.name]):.3f}" if tool.ours else "1"
        each = ", ".join(f"{w:.1f}" for w in walls)
        print(f"{tool.name:24} {statistics.median(walls):16.1f} s {each:>28} {mid:>15} {p90:>7} {shown_ratio:>7}")
    print("(ratio: the geometric mean over the tests of the tool's median / pytest-benchmark's)")
    print()
    for tool in ours:
        parts = {k: statistics.median(s.parts.get(k, 0.0) for s in tool.sessions) for k in tool.sessions[0].parts}
        wall = statistics.median(s.wall for s in tool.sessions)
        rest = wall - sum(parts.values())
        shown = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in parts.items())
        print(
            f"{tool.name}, where a session's time went (medians over the sessions): {shown}; the rest {rest:.1f} s "
            f"(memory probe, per-test setup, collection, start) of {wall:.1f} s"
        )


def _pct(value: float | None) -> str:
    return f"{value:7.2%}" if value is not None else f"{'-':>7}"


if __name__ == "__main__":
    sys.exit(main())
