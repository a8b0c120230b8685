"""Proof at scale (issue 37, item 5): sessions of N measured tests, saved and gated, and the command line on their
results: the time, CPU, peak RSS and file sizes of each, and how each grows with N.

    python bench/scale.py                              # 100, 1,000 and 5,000 tests
    python bench/scale.py --tests 100,1000 --json /tmp/scale.json
    python bench/scale.py --tests 100,1000 --kinds mlp  # MLP training steps only (target 1 is per MLP record)

For each N of ``--tests``, in a fresh directory (under ``--workdir``, kept; default a temporary one, removed):

1. a test file of N tests as users write them, parametrized from three functions taken in turn (``--kinds``): a
   64x64 matmul through the ``gpuperf`` fixture (``gpuperf.measure(fn, flops=...)``), one training step of an
   8-layer MLP (8 ``Linear(64, 64)``, batch 32, SGD) through the same fixture, and ``sum(range(100))`` through the
   ``benchmark`` fixture (ours, pytest-benchmark's blocked with ``-p no:benchmark``), and a ``conftest.py`` that
   notes when the first test started and the last one ended (so the time before and after the tests is known);
2. ``python -m pytest -q -p no:randomly -p no:cacheprovider -p no:benchmark`` with ``SESSION_OPTIONS`` (the
   defaults but for a short measuring budget, without which 5,000 tests take hours, and no quiet wait, which on a
   shared machine measures the other users) and ``--gpuperf-save=scale``: the baseline;
3. the same with ``--gpuperf-compare=scale``: the gate on the stored route, its confirmation runs included;
4. ``pytest-gpuperf runs``, ``pytest-gpuperf report RUN scale`` and ``pytest-gpuperf compare scale RUN`` on the
   second session's run.

Each is a fresh process, reaped with ``os.wait4``: its wall time, its CPU time (user + system, its own children's
included: the confirmation runs) and its peak RSS (``ru_maxrss``: the process's, or its largest child's). Sizes:
the run files, the baseline file, the traces kept beside the baseline (their total, their count and the size of
each) and the second run's traces, the HTML page.

It prints one markdown table (a row per figure, a column per N), with the growth exponent of each figure between the
two largest N, ``log(f(N2) / f(N1)) / log(N2 / N1)`` (1: linear), judged against the target of at most 1.05 (but for
the record count, the gated run's traces, which follow the gate's failing rows, and the baseline's traces and their
count, which follow how many profiles the budget kept whole: its size a trace is judged), and the peak RSS per record of
each session, ``(RSS(N) - RSS(N0)) / (N - N0)`` with N0 the smallest N, judged against the target of at most 50 KiB.
Then one line per target, ``met:`` or ``MISSED:``; the exit status is 1 when one is missed. No speed is asserted by
the tests; the figures are this machine's. Results: bench/evidence/scale.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from tabulate import tabulate

#: The sessions' options beyond the defaults, printed with the table: a short measuring budget (the minimum time
#: must be below the cap), and no wait for other processes to leave the cores before each test.
SESSION_OPTIONS: Final = (
    "--gpuperf-max-time=0.02",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-min-time=0.01",
    "--gpuperf-quiet-wait=0",
)
PYTEST: Final = (
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:randomly",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:benchmark",
)
CLI: Final = (sys.executable, "-m", "pytest_gpuperf.cli")
BASELINE: Final = "scale"
KINDS: Final = ("matmul", "mlp", "trivial")
#: The targets: growth between the two largest N, and peak RSS per record of a session.
MAX_EXPONENT: Final = 1.05
MAX_RSS_PER_RECORD: Final = 50 * 1024

TESTS: Final = '''\
"""{count} measured tests for bench/scale.py: {counts}."""

import pytest
import torch


@pytest.fixture(scope="module")
def mlp_step():
    """One training step of an 8-layer MLP (8 Linear(64, 64), ReLU between them, batch 32, SGD)."""
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.randn(32, 64)

    def step():
        optimizer.zero_grad()
        model(batch).sum().backward()
        optimizer.step()

    return step


@pytest.mark.parametrize("i", range({matmul}))
def test_matmul(gpuperf, i):
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    gpuperf.measure(lambda: a @ b, flops=2 * 64**3)


@pytest.mark.parametrize("i", range({mlp}))
def test_mlp_step(gpuperf, mlp_step, i):
    gpuperf.measure(mlp_step, samples=32)


@pytest.mark.parametrize("i", range({trivial}))
def test_trivial(benchmark, i):
    benchmark(sum, range(100))
'''

#: Notes when the session's first test started and its last one ended, in the session's own process only (the
#: gate's confirmation runs are pytest sessions of this directory too).
CONFTEST: Final = '''\
"""bench/scale.py's clock: when the first test started and the last one ended (time.time()), written at the end."""

import json
import os
import time

import pytest

_OWNER = "SCALE_PHASES_OWNER"
_MINE = _OWNER not in os.environ
os.environ.setdefault(_OWNER, str(os.getpid()))
_TIMES = {}


def pytest_runtest_logstart(nodeid, location):
    _TIMES.setdefault("first_test", time.time())


def pytest_runtest_logfinish(nodeid, location):
    _TIMES["last_test"] = time.time()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if _MINE and os.environ.get("SCALE_PHASES"):
        _TIMES["end"] = time.time()
        with open(os.environ["SCALE_PHASES"], "w") as out:
            json.dump(_TIMES, out)
'''


@dataclass(frozen=True)
class Cost:
    """What one process cost, reaped with ``os.wait4``: wall and CPU seconds, peak RSS in bytes, the 1-minute load
    average before and after it, and when it started (``time.time()``)."""

    wall: float
    cpu: float
    rss: int
    load: tuple[float, float]
    started: float


def run_measured(
    command: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None, accept: Sequence[int] = (0,)
) -> tuple[Cost, str]:
    """Run ``command`` in a fresh process; its cost and its output (stdout and stderr). An exit status outside
    ``accept`` stops the script with the output's end."""
    with tempfile.TemporaryFile() as out:
        before = os.getloadavg()[0]
        started = time.time()
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if process.returncode not in accept:
        raise SystemExit(f"{' '.join(command)}: exit status {process.returncode}:\n{text[-3000:]}")
    cost = Cost(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, (before, os.getloadavg()[0]), started)
    return cost, text


def counts(tests: int, kinds: Sequence[str]) -> dict[str, int]:
    """How many tests of each kind make ``tests``, the kinds taken in turn."""
    return {kind: len(range(kinds.index(kind), tests, len(kinds))) if kind in kinds else 0 for kind in KINDS}


def write_tests(directory: Path, tests: int, kinds: Sequence[str]) -> None:
    directory.mkdir(parents=True)
    (directory / "pytest.ini").write_text("[pytest]\n")
    (directory / "conftest.py").write_text(CONFTEST)
    each = counts(tests, kinds)
    listed = ", ".join(f"{n} {kind}" for kind, n in each.items())
    (directory / "test_scale.py").write_text(TESTS.format(count=tests, counts=listed, **each))


def size(path: Path) -> int:
    """Bytes in a file, or in every file under a folder (0 when absent)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def session(directory: Path, results: Path, name: str, *options: str) -> tuple[Cost, str, dict[str, float]]:
    """One pytest session of the directory's tests; its cost, output and the conftest's times."""
    phases = directory / f"phases-{name}.json"
    env = {**os.environ, "SCALE_PHASES": str(phases)}
    env.pop("SCALE_PHASES_OWNER", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [*PYTEST, *SESSION_OPTIONS, f"--gpuperf-results-dir={results}", *options]
    cost, out = run_measured(command, directory, env, accept=(0, 1) if name == "gate" else (0,))
    times: dict[str, float] = json.loads(phases.read_text())
    return cost, out, times


def saved(out: str, results: Path) -> tuple[int, Path]:
    """The records a session saved and its run file, from its save line."""
    found = re.search(r"^gpuperf: saved (\d+) records to (.+\.json)$", out, re.MULTILINE)
    if found is None:
        raise SystemExit(f"no save line in the session's output:\n{out[-3000:]}")
    path = Path(found.group(2))
    assert path.is_relative_to(results), path
    return int(found.group(1)), path


@dataclass
class Point:
    """Every figure of one N: seconds, bytes and counts by key (``ROWS``), and the gate's own lines."""

    tests: int
    figures: dict[str, float]
    gate_lines: list[str]


#: The table's rows: key, label, unit ("s", "MiB", "n").
ROWS: Final = (
    ("records", "records saved (each session)", "n"),
    ("save.wall", "session `--gpuperf-save`: wall", "s"),
    ("save.cpu", "session `--gpuperf-save`: CPU", "s"),
    ("save.rss", "session `--gpuperf-save`: peak RSS", "MiB"),
    ("save.before", "session `--gpuperf-save`: before the first test", "s"),
    ("save.after", "session `--gpuperf-save`: after the last test (saves)", "s"),
    ("gate.wall", "session `--gpuperf-compare`: wall", "s"),
    ("gate.cpu", "session `--gpuperf-compare`: CPU", "s"),
    ("gate.rss", "session `--gpuperf-compare`: peak RSS", "MiB"),
    ("gate.before", "session `--gpuperf-compare`: before the first test", "s"),
    ("gate.after", "session `--gpuperf-compare`: after the last test (the gate)", "s"),
    ("size.run", "results file (a run)", "MiB"),
    ("size.baseline", "baseline file (1 run)", "MiB"),
    ("size.baseline_traces", "traces beside the baseline", "MiB"),
    ("count.baseline_traces", "traces beside the baseline: files", "n"),
    ("size.baseline_trace", "traces beside the baseline: each", "KiB"),
    ("size.run_traces", "traces of the gated run", "MiB"),
    ("runs.wall", "`pytest-gpuperf runs`: wall", "s"),
    ("runs.rss", "`pytest-gpuperf runs`: peak RSS", "MiB"),
    ("report.wall", "`pytest-gpuperf report RUN scale`: wall", "s"),
    ("report.cpu", "`pytest-gpuperf report RUN scale`: CPU", "s"),
    ("report.rss", "`pytest-gpuperf report RUN scale`: peak RSS", "MiB"),
    ("size.page", "`pytest-gpuperf report`: page", "MiB"),
    ("compare.wall", "`pytest-gpuperf compare scale RUN`: wall", "s"),
    ("compare.cpu", "`pytest-gpuperf compare scale RUN`: CPU", "s"),
    ("compare.rss", "`pytest-gpuperf compare scale RUN`: peak RSS", "MiB"),
)
#: Rows whose growth is not judged: the count itself, the failing rows' traces, which follow the verdicts, and the
#: baseline's traces and their count, which follow how many profiles the budget kept whole (the load's doing); the
#: size of each is judged.
UNJUDGED: Final = ("records", "size.run_traces", "size.baseline_traces", "count.baseline_traces")
#: The sessions whose peak RSS per record is judged (target 1).
PER_RECORD: Final = ("save.rss", "gate.rss")


def measure(directory: Path, tests: int, kinds: Sequence[str]) -> Point:
    """Both sessions and the three commands on N tests, in ``directory``."""
    write_tests(directory, tests, kinds)
    results = directory / "results"
    figures: dict[str, float] = {}
    loads: list[float] = []
    gate_out, run = "", results
    for name, option in (("save", f"--gpuperf-save={BASELINE}"), ("gate", f"--gpuperf-compare={BASELINE}")):
        cost, out, times = session(directory, results, name, option)
        records, run = saved(out, results)
        if records != tests:
            raise SystemExit(f"{name}: {records} records saved for {tests} tests:\n{out[-3000:]}")
        figures |= {f"{name}.wall": cost.wall, f"{name}.cpu": cost.cpu, f"{name}.rss": cost.rss}
        figures[f"{name}.before"] = times["first_test"] - cost.started
        figures[f"{name}.after"] = times["end"] - times["last_test"]
        figures["records"] = records
        loads += cost.load
        print(f"N={tests}, session {name}: {cost.wall:.1f} s, load average {cost.load[0]:.2f} -> {cost.load[1]:.2f}")
        gate_out = out  # the second session's: the gate's lines and its run
    found = re.findall(r"^gpuperf gate: .*$|^gpuperf: measured .* again .*$", gate_out, re.MULTILINE)
    gate_lines = list(dict.fromkeys(found))  # the gate's line is printed twice: under its table and at the end
    figures["size.run"] = size(run)
    figures["size.baseline"] = size(results / "baselines" / f"{BASELINE}.json")
    kept = results / "baselines" / f"{BASELINE}.traces"
    figures["size.baseline_traces"] = size(kept)
    figures["count.baseline_traces"] = sum(1 for p in kept.rglob("*") if p.is_file()) if kept.is_dir() else 0
    figures["size.baseline_trace"] = figures["size.baseline_traces"] / max(figures["count.baseline_traces"], 1)
    figures["size.run_traces"] = size(results / "traces")
    page = directory / "page.html"
    where = ("--results-dir", str(results))
    commands = {
        "runs": ([*CLI, "runs", *where], (0,)),
        "report": ([*CLI, "report", str(run), BASELINE, *where, "-o", str(page)], (0,)),
        "compare": ([*CLI, "compare", BASELINE, str(run), *where], (0, 1)),  # 1: the gate failed
    }
    for name, (command, accept) in commands.items():
        cost, _ = run_measured(command, directory, accept=accept)
        figures |= {f"{name}.wall": cost.wall, f"{name}.cpu": cost.cpu, f"{name}.rss": cost.rss}
        loads += cost.load
    figures["size.page"] = size(page)
    figures["load.min"], figures["load.max"] = min(loads), max(loads)
    return Point(tests, figures, gate_lines)


def exponent(low: Point, high: Point, key: str) -> float | None:
    """The growth exponent of a figure between two N, or None where it is not positive at both."""
    a, b = low.figures.get(key, 0.0), high.figures.get(key, 0.0)
    if a <= 0 or b <= 0:
        return None
    return math.log(b / a) / math.log(high.tests / low.tests)


def per_record(first: Point, point: Point, key: str) -> float:
    """Peak RSS per record above the smallest N's, in bytes."""
    return (point.figures[key] - first.figures[key]) / (point.figures["records"] - first.figures["records"])


def cell(value: float, unit: str) -> str:
    if unit == "MiB":
        return f"{value / 2**20:.2f}"
    if unit == "KiB":
        return f"{value / 2**10:.1f}"
    if unit == "n":
        return f"{value:.0f}"
    return f"{value:.2f}"


def table(points: Sequence[Point]) -> tuple[str, list[tuple[str, bool]]]:
    """The markdown table, and every target judged: its line and whether it was met."""
    low, high = points[-2], points[-1]
    growth = f"growth {low.tests}->{high.tests}"
    header = ["figure", "unit", *(f"N={p.tests}" for p in points), growth]
    rows: list[list[str]] = []
    judged: list[tuple[str, bool]] = []
    for key, label, unit in ROWS:
        power = exponent(low, high, key)
        rows.append(
            [label, unit, *(cell(p.figures[key], unit) for p in points), "-" if power is None else f"{power:.3f}"]
        )
        if power is not None and key not in UNJUDGED:
            judged.append((f"{label}: growth exponent {power:.3f} (target <= {MAX_EXPONENT})", power <= MAX_EXPONENT))
    first = points[0]
    for key in PER_RECORD:
        label = next(label for k, label, _ in ROWS if k == key)
        values = [per_record(first, p, key) for p in points[1:]]
        rows.append(
            [f"{label} per record above N={first.tests}", "KiB", "-", *(f"{v / 1024:.1f}" for v in values), "-"]
        )
        judged.append(
            (
                f"{label} per record: {values[-1] / 1024:.1f} KiB (target <= {MAX_RSS_PER_RECORD // 1024} KiB)",
                values[-1] <= MAX_RSS_PER_RECORD,
            )
        )
    return tabulate(rows, headers=header, tablefmt="github", disable_numparse=True), judged


def machine() -> str:
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = "not installed"
    return f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}, torch {torch}"


def sizes(text: str) -> list[int]:
    values = sorted({int(part) for part in text.split(",")})
    if len(values) < 2 or values[0] < 1:
        raise argparse.ArgumentTypeError("give two or more positive test counts, such as 100,1000,5000")
    return values


def kinds(text: str) -> list[str]:
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values or any(v not in KINDS for v in values) or len(set(values)) < len(values):
        raise argparse.ArgumentTypeError(f"a comma list of {', '.join(KINDS)}, each once")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tests", type=sizes, default=[100, 1000, 5000], help="test counts (default: 100,1000,5000)")
    parser.add_argument(
        "--kinds", type=kinds, default=list(KINDS), help=f"the tests' kinds, taken in turn (default: {','.join(KINDS)})"
    )
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--workdir", type=Path, help="keep every session's directory here (default: a temporary one)")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="gpuperf-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"bench/scale.py, {date}; {machine()}")
    print(f"tests of kinds {', '.join(args.kinds)}, taken in turn; session options: {' '.join(SESSION_OPTIONS)}")
    points: list[Point] = []
    try:
        for tests in args.tests:
            points.append(measure(work / f"n{tests}", tests, args.kinds))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    text, judged = table(points)
    loads = [x for p in points for x in (p.figures["load.min"], p.figures["load.max"])]
    print(f"\nload average (1 min) around the processes: {min(loads):.2f} to {max(loads):.2f}\n")
    print(text)
    print()
    for point in points:
        for line in point.gate_lines:
            print(f"N={point.tests}: {line if len(line) <= 300 else line[:300] + ' ...'}")  # the JSON has it whole
    print()
    for line, met in judged:
        print(f"{'met' if met else 'MISSED'}: {line}")
    missed = sum(not met for _, met in judged)
    print(f"{len(judged) - missed} of {len(judged)} targets met")
    if args.json is not None:
        record = {
            "date": date,
            "machine": machine(),
            "kinds": args.kinds,
            "session_options": list(SESSION_OPTIONS),
            "points": [asdict(p) for p in points],
            "targets": [{"target": line, "met": met} for line, met in judged],
        }
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
