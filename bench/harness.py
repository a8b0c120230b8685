"""Side-by-side, on this machine's CPU in one run: pytest-gpuperf's sampler against the usual tools.

    python bench/harness.py            # about 1-2 minutes on 2 cores

For each workload (an empty callable, a 512x512 fp32 matmul, a training step of the
1000-512-256-2 MLP at batch 256) and each tool it prints the median time per call,
the half-width of the 95% confidence interval of that median computed the same
distribution-free way from each tool's own raw samples, the sample count, and the
wall time the tool took. Tools:

- pytest-gpuperf, target 1% (its default);
- torch.utils.benchmark.Timer.blocked_autorange() with its defaults, and repeated with a
  doubling min_run_time until its interval is within 1% (the wall time is the sum);
- Timer.adaptive_autorange() with its defaults;
- pytest-benchmark with its defaults, run by pytest in a subprocess (wall time of the
  benchmark() call itself, measured inside the test, so pytest start-up is excluded).

Every tool runs at torch's default thread count: pytest-gpuperf with ``threads="torch"``
(its own default, ``auto``, is one thread on a CPU), torch's Timer with
num_threads=torch.get_num_threads() (its default is one thread).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tabulate import tabulate
from torch.utils.benchmark import Timer

from pytest_gpuperf import measure
from pytest_gpuperf.measuring import format_duration, median_ci

HERE = Path(__file__).resolve().parent


def empty() -> Callable[[], object]:
    return lambda: None


def matmul512() -> Callable[[], object]:
    a = torch.randn(512, 512)
    b = torch.randn(512, 512)
    return lambda: a @ b


def mlp_step() -> Callable[[], object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1000, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1000)
    y = torch.randint(0, 2, (256,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()

    return step


WORKLOADS: dict[str, Callable[[], Callable[[], object]]] = {
    "empty callable": empty,
    "matmul 512 fp32": matmul512,
    "MLP train step b=256": mlp_step,
}


@dataclass(frozen=True)
class Row:
    workload: str
    tool: str
    samples: Sequence[float]  # seconds per call
    wall: float

    def cells(self) -> list[str]:
        data = np.asarray(self.samples)
        median = float(np.median(data))
        ci = median_ci(data)
        half = ci.relative_half_width(median)
        # Fewer than 6 samples cannot give a 95% interval of the median; say what they give.
        note = "" if ci.confidence >= 0.95 else f" ({ci.confidence:.0%} only)"
        return [
            self.workload,
            self.tool,
            format_duration(median),
            f"+-{half:.2%}{note}",
            str(len(data)),
            f"{self.wall:.2f} s",
        ]


def run_gpuperf(name: str, fn: Callable[[], object]) -> Row:
    start = time.perf_counter()
    m = measure(fn, device="cpu", target=0.01, memory=False, threads="torch")
    return Row(name, "pytest-gpuperf (1% target)", m.samples, time.perf_counter() - start)


def _timer(fn: Callable[[], object]) -> Timer:
    return Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())


def run_blocked(name: str, fn: Callable[[], object]) -> Row:
    start = time.perf_counter()
    m = _timer(fn).blocked_autorange()
    return Row(name, "Timer.blocked_autorange()", m.times, time.perf_counter() - start)


def run_blocked_until(name: str, fn: Callable[[], object], target: float = 0.01, cap: float = 60.0) -> Row:
    start = time.perf_counter()
    min_run_time = 0.2
    while True:
        m = _timer(fn).blocked_autorange(min_run_time=min_run_time)
        median = float(np.median(m.times))
        spent = time.perf_counter() - start
        ci = median_ci(m.times)
        if (ci.confidence >= 0.95 and ci.relative_half_width(median) <= target) or spent > cap:
            return Row(name, "blocked_autorange, doubled to 1%", m.times, spent)
        min_run_time *= 2


def run_adaptive(name: str, fn: Callable[[], object]) -> Row:
    start = time.perf_counter()
    m = _timer(fn).adaptive_autorange()
    return Row(name, "Timer.adaptive_autorange()", m.times, time.perf_counter() - start)


PYTEST_BENCHMARK_TEST = """
import sys, time
sys.path.insert(0, {here!r})
import harness
import pytest

@pytest.mark.parametrize("name", {names!r})
def test_bench(benchmark, name):
    fn = harness.WORKLOADS[name]()
    start = time.perf_counter()
    benchmark(fn)
    benchmark.extra_info["wall"] = time.perf_counter() - start
"""


def run_pytest_benchmark(names: Sequence[str]) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        test = Path(tmp) / "test_pb.py"
        test.write_text(textwrap.dedent(PYTEST_BENCHMARK_TEST.format(here=str(HERE), names=list(names))))
        out = Path(tmp) / "pb.json"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:gpuperf", "-p", "no:cacheprovider", str(test)]
        cmd += [f"--benchmark-json={out}", "--benchmark-save-data", f"--rootdir={tmp}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp)
        if done.returncode != 0:
            raise SystemExit(f"pytest-benchmark run failed:\n{done.stdout}\n{done.stderr}")
        data = json.loads(out.read_text())
    rows = []
    for bench in data["benchmarks"]:
        rows.append(
            Row(bench["param"], "pytest-benchmark (defaults)", bench["stats"]["data"], bench["extra_info"]["wall"])
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=list(WORKLOADS), action="append", help="run only these workloads")
    args = parser.parse_args(argv)
    names = args.only or list(WORKLOADS)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; timing on the CPU", flush=True)
    started = time.perf_counter()
    rows: list[Row] = []
    for name in names:
        fn = WORKLOADS[name]()
        fn()  # everyone gets a warm start: first-call costs are not what is compared
        for runner in (run_gpuperf, run_blocked, run_blocked_until, run_adaptive):
            rows.append(runner(name, fn))
            print(f"  {name}: {rows[-1].tool} done", file=sys.stderr, flush=True)
    rows.extend(run_pytest_benchmark(names))
    rows.sort(key=lambda r: names.index(r.workload))
    print(
        tabulate(
            [r.cells() for r in rows], headers=["workload", "tool", "median", "95% CI of median", "samples", "wall"]
        )
    )
    print(f"total wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
