"""pytest-benchmark and pytest-gpuperf side by side on the same unchanged suites, on the CPU.

    python bench/pytest_benchmark_side.py [--threads 1] [--repeats 3] [--quick] [--keep DIR]

Writes two suites written for pytest-benchmark into a temporary directory: a
TorchBench-style one (a class marked ``@pytest.mark.benchmark(warmup=True,
warmup_iterations=3, disable_gc=False, timer=time.perf_counter, group="hub")``, ``device``
parametrized by the suite at class scope, ``benchmark(task.invoke)`` then ``extra_info``)
and a pybench-style one (``benchmark.pedantic(run_sync, args=(...), rounds=5)``), with
small torch workloads. Runs them in one session of this script, each tool in a
subprocess: pytest-benchmark (``-p no:gpuperf --benchmark-json``), then pytest-gpuperf's
``benchmark`` fixture (``-p no:benchmark --gpuperf-json``), both with their default
budgets, ``--repeats`` sessions each, alternating. Prints, per test, each tool's median
(the median of its sessions' medians) and sample count, the ratio of the medians
(pytest-gpuperf / pytest-benchmark), the geometric mean of the ratios per style, how far
one test's median moved between a tool's sessions, and each tool's wall time per session.

Both processes run torch with ``--threads`` intra-op threads (``OMP_NUM_THREADS``, and
``--gpuperf-threads=torch`` so that pytest-gpuperf keeps them): the tools then differ in
how they time, not in what they run. ``--quick`` shortens both tools' budgets (a smoke
run, ``tests/test_bench.py``); its figures mean little.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
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


def run_tool(directory: Path, args: list[str], threads: int) -> float:
    """Run pytest in ``directory``; its wall seconds (the whole process, start to exit)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTEST_ADDOPTS": ""}
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
    return took


def pytest_benchmark_medians(path: Path) -> dict[str, tuple[float, str]]:
    """test node id -> (median seconds per call, rounds x iterations) from pytest-benchmark's JSON."""
    data = json.loads(path.read_text())
    return {
        b["fullname"]: (float(b["stats"]["median"]), f"{b['stats']['rounds']}x{b['stats']['iterations']}")
        for b in data["benchmarks"]
    }


def gpuperf_medians(path: Path) -> dict[str, tuple[float, str]]:
    """test node id -> (median seconds per call, samples x iterations, 95% CI) from pytest-gpuperf's results file."""
    from pytest_gpuperf.results import load_run

    out = {}
    for record in load_run(path).records:
        m = record.measurement
        out[record.test] = (m.median, f"{len(m.samples)}x{m.iterations} {m.ci_text}")
    return out


def fmt(seconds: float) -> str:
    from pytest_gpuperf.measuring import format_duration

    return format_duration(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads in both tools (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="sessions of each tool, alternating (default 3)")
    parser.add_argument("--quick", action="store_true", help="short budgets: a smoke run whose figures mean little")
    parser.add_argument("--keep", type=Path, help="write the suites and JSON files here instead of a temporary dir")
    options = parser.parse_args()
    theirs_args = ["-p", "no:gpuperf", "--benchmark-json=pytest-benchmark.json"]
    ours_args = ["-p", "no:benchmark", "--gpuperf-json=gpuperf.json", "--gpuperf-threads=torch"]
    if options.quick:
        theirs_args += ["--benchmark-max-time=0.05"]
        ours_args += ["--gpuperf-max-time=0.2", "--gpuperf-warmup-time=0.05", "--gpuperf-min-time=0.02"]
    walls: dict[str, list[float]] = {"theirs": [], "ours": []}
    theirs: dict[str, list[tuple[float, str]]] = {}
    ours: dict[str, list[tuple[float, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = options.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "test_torchbench.py").write_text(TORCHBENCH)
        (directory / "test_pybench.py").write_text(PYBENCH)
        # Alternating, so that a change in the machine's speed falls on both tools alike.
        for _ in range(options.repeats):
            walls["theirs"].append(run_tool(directory, theirs_args, options.threads))
            for test, value in pytest_benchmark_medians(directory / "pytest-benchmark.json").items():
                theirs.setdefault(test, []).append(value)
            walls["ours"].append(run_tool(directory, ours_args, options.threads))
            for test, value in gpuperf_medians(directory / "gpuperf.json").items():
                ours.setdefault(test, []).append(value)
    print(
        f"{dt.date.today().isoformat()}, {platform.node()}, {os.cpu_count()} CPUs, torch threads {options.threads}, "
        f"{options.repeats} sessions of each tool{', quick budgets' if options.quick else ''}"
    )
    print("medians per call: the median over the sessions of each session's median (samples of the last session)")
    header = f"{'test':60} {'pytest-benchmark':>26} {'pytest-gpuperf':>32} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    ratios: dict[str, list[float]] = {}
    for test in sorted(theirs):
        if test not in ours:
            print(f"{test:60} measured by pytest-benchmark only")
            continue
        t_median = statistics.median(m for m, _ in theirs[test])
        o_median = statistics.median(m for m, _ in ours[test])
        t_n, o_n = theirs[test][-1][1], ours[test][-1][1]
        ratio = o_median / t_median
        style = "pedantic(rounds=5)" if "pybench" in test else "benchmark(fn)"
        ratios.setdefault(style, []).append(ratio)
        print(f"{test:60} {fmt(t_median):>10} ({t_n:>10}) {fmt(o_median):>10} ({o_n:>17}) {ratio:7.3f}")
    print()
    for style, values in ratios.items():
        geomean = math.exp(statistics.fmean(math.log(r) for r in values))
        spread = ", ".join(f"{r:.3f}" for r in values)
        print(f"{style}: geometric mean of the ratios {geomean:.3f} ({spread})")
    spread_lines = []
    for tool, runs in (("pytest-benchmark", theirs), ("pytest-gpuperf", ours)):
        widest = max((max(m for m, _ in v) / min(m for m, _ in v) for v in runs.values() if len(v) > 1), default=1.0)
        spread_lines.append(f"{tool} {widest:.2f}x")
    print(f"largest max/min of one test's median over the sessions: {', '.join(spread_lines)}")
    wall_theirs, wall_ours = statistics.median(walls["theirs"]), statistics.median(walls["ours"])
    print(f"wall time per session (median): pytest-benchmark {wall_theirs:.1f} s, pytest-gpuperf {wall_ours:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
