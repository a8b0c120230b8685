"""A planted culprit among 64 commits, found by ``pytest-gpuperf history regressions`` in at most 8 ``ab`` runs;
and a creep of 1% per commit over 8 commits, reported.

A scratch git repository is built: a workloads module (``perf/workloads.py``) whose one
workload, ``spin``, sums ``DELAY / 1e-8`` numbers per step (``perf/delay.py``; a fixed amount of CPU
work, about ``DELAY`` seconds here: a busy wait until a wall-clock time would hide a slowdown
whenever the process is preempted past its end), and a commit per change of ``DELAY``. The
history (asv results, as ``history record`` writes them) holds one point per recorded commit:
its nominal ``DELAY`` times a little Gaussian noise (0.5%, seeded),
so that the change-point detector sees the step; every ``ab`` run measures the commits for real,
on this machine, in paired rounds.

* **culprit**: 3 recorded commits, then the step's base, then 64 commits of which one (drawn at
  random, seeded) makes ``spin`` 25% slower, of which only the last is recorded, then 2 more
  recorded: the step lies across 64 commits. Found when the reported culprit is the planted one;
  its ``ab`` runs are counted (target: at most 8).
* **creep**: 24 commits, every one recorded, the 9th to the 16th each 1% slower than the last.
  Reported when a confirmed slower step (a creep, or a commit inside the creep) is listed.

Usage: ``python bench/culprit.py [--trials N] [--max-time S] [--seed N] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
MACHINE: Final = "scratch-box"
BENCHMARK: Final = "perf.test_spin.test_spin"
BASE_DELAY: Final = 0.002

_WORKLOADS: Final = '''\
"""The scratch repository's one workload: a fixed amount of CPU work, DELAY / 1e-8 numbers summed."""

from pytest_gpuperf import Step, Workload

from .delay import DELAY

COUNT = round(DELAY / 1e-8)


def _build(device, size):
    def step():
        sum(range(COUNT))
        return DELAY  # what an exact timer adds up (the tests' tests/exact_timing.py); ab's own timer ignores it

    return Step(step, {"calls": 1})


WORKLOADS = {"spin": Workload("spin", _build)}
'''


#: The scratch repository's test, so that ``history record --tests perf`` can record real history there too.
_TEST: Final = """\
from .workloads import WORKLOADS


def test_spin(gpuperf):
    gpuperf.run(WORKLOADS["spin"])
"""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def scratch_repository(root: Path, delays: Sequence[float], *, work: bool = True) -> list[str]:
    """A git repository at ``root`` with one commit per delay (oldest first); returns the commits' full hashes.

    ``work=False``: the step does no work, it only returns ``DELAY`` (for an exact timer, in tests)."""
    (root / "perf").mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "bench@example.com")
    _git(root, "config", "user.name", "bench")
    _git(root, "config", "commit.gpgsign", "false")
    (root / "perf" / "__init__.py").write_text("", encoding="utf-8")
    workloads = _WORKLOADS if work else _WORKLOADS.replace("COUNT = round(DELAY / 1e-8)", "COUNT = 0")
    (root / "perf" / "workloads.py").write_text(workloads, encoding="utf-8")
    (root / "perf" / "test_spin.py").write_text(_TEST, encoding="utf-8")
    (root / ".gitignore").write_text(".asv/\n", encoding="utf-8")
    commits = []
    for number, delay in enumerate(delays):
        (root / "perf" / "delay.py").write_text(f"DELAY = {delay!r}  # commit {number}\n", encoding="utf-8")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", f"commit {number}: DELAY {delay:.6f}")
        commits.append(_git(root, "rev-parse", "HEAD"))
    return commits


def write_history(
    results: Path, commits: Sequence[str], values: Sequence[float], machine: str = MACHINE, device: str = "cpu"
) -> None:
    """asv results of ``BENCHMARK``, one file per commit, as ``history record`` writes them."""
    from pytest_gpuperf.history import COLUMNS, FORMAT, RESULTS_API, Point, row_of

    (results / machine).mkdir(parents=True, exist_ok=True)
    (results / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}), encoding="utf-8")
    for number, (commit, value) in enumerate(zip(commits, values, strict=True)):
        row = row_of({device: Point(value, None, None, None, None, 1, (value,), 0, 0.0)})
        row[2] = FORMAT
        data = {
            "version": RESULTS_API,
            "commit_hash": commit,
            "env_name": "existing-py",
            "date": 1_700_000_000_000 + number * 60_000,
            "params": {"machine": machine},
            "python": "3",
            "requirements": {},
            "env_vars": {},
            "result_columns": list(COLUMNS),
            "results": {BENCHMARK: row},
            "durations": {},
        }
        (results / machine / f"{commit[:8]}-existing-py.json").write_text(json.dumps(data), encoding="utf-8")


def noisy(values: Sequence[float], seed: int, spread: float = 0.005) -> list[float]:
    rng = random.Random(seed)
    return [v * (1 + rng.gauss(0.0, spread)) for v in values]


def regressions_args(repo: Path, max_time: float, *extra: str, machine: str = MACHINE) -> list[str]:
    """The words of ``pytest-gpuperf history regressions`` on a scratch repository, after the program's name."""
    return [
        "history",
        "regressions",
        "--repo",
        str(repo),
        "--machine",
        machine,
        "--branch",
        "main",
        "--workloads",
        "perf/workloads.py",
        "--device",
        "cpu",
        "--max-time",
        str(max_time),
        "-q",
        *extra,
    ]


def regressions(repo: Path, max_time: float, *extra: str) -> tuple[int, dict[str, Any]]:
    """``pytest-gpuperf history regressions`` on ``repo`` (its exit status and JSON report)."""
    report = repo / "regressions.json"
    argv = [sys.executable, "-m", "pytest_gpuperf", *regressions_args(repo, max_time, "--json", str(report), *extra)]
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"history regressions failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.returncode, json.loads(report.read_text(encoding="utf-8"))


def culprit_scenario(
    root: Path, seed: int, between: int = 64, factor: float = 1.25, *, work: bool = True
) -> tuple[int, list[str]]:
    """(the planted culprit's index among the ``between`` commits, the commits); history written."""
    culprit = random.Random(seed).randrange(1, between + 1)  # 1..between: the n-th commit after the base
    delays = [BASE_DELAY] * 4 + [BASE_DELAY * (factor if n >= culprit else 1.0) for n in range(1, between + 1)]
    delays += [BASE_DELAY * factor] * 2
    commits = scratch_repository(root, delays, work=work)
    recorded = [0, 1, 2, 3, 3 + between, 4 + between, 5 + between]
    write_history(
        root / ".asv" / "pytest" / "results", [commits[i] for i in recorded], noisy([delays[i] for i in recorded], seed)
    )
    return culprit, commits


def creep_scenario(root: Path, seed: int, per: float = 0.01, length: int = 8) -> list[str]:
    delays = [BASE_DELAY] * 8 + [BASE_DELAY * (1 + per) ** n for n in range(1, length + 1)]
    delays += [delays[-1]] * 8
    commits = scratch_repository(root, delays)
    write_history(root / ".asv" / "pytest" / "results", commits, noisy(delays, seed))
    return commits


def _trial(kind: str, seed: int, max_time: float) -> tuple[int, list[str], dict[str, Any], float]:
    """One scenario in a scratch repository: (the planted culprit's number, or -1, the commits, the report, the
    command's wall time)."""
    with tempfile.TemporaryDirectory(prefix=f"bisect-{kind}-") as tmp:
        repo = Path(tmp) / "repo"
        if kind == "culprit":
            planted, commits = culprit_scenario(repo, seed)
        else:
            planted, commits = -1, creep_scenario(repo, seed)
        start = time.perf_counter()
        _, report = regressions(repo, max_time)
        return planted, commits, report, time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--max-time", type=float, default=5.0, help="ab's seconds of rounds per pair (its default)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="one trial of each, short rounds (a smoke run)")
    args = parser.parse_args(argv)
    trials, max_time = (1, 0.5) if args.quick else (args.trials, args.max_time)
    print(f"# bench/culprit.py: {trials} trial(s) each, ab --max-time {max_time:g}, seed {args.seed}")
    print("| scenario | trial | planted | reported | ab runs | wall |")
    print("| --- | --- | --- | --- | --- | --- |")
    found = within = creeps = 0
    for trial in range(trials):
        planted, commits, report, wall = _trial("culprit", args.seed + trial, max_time)
        findings = report["findings"]
        hit = next((f for f in findings if f["culprit"]["kind"] == "commit"), None)
        reported = "none" if hit is None else f"commit {commits.index(hit['culprit']['commit']) - 3}"
        runs = sum(f["culprit"]["ab_runs"] for f in findings)
        ok = reported == f"commit {planted}"
        found += ok
        within += ok and runs <= 8
        print(f"| culprit among 64 | {trial + 1} | commit {planted} | {reported} | {runs} | {wall:.0f} s |")
    for trial in range(trials):
        _, commits, report, wall = _trial("creep", args.seed + 100 + trial, max_time)
        findings = report["findings"]
        slower = [f for f in findings if f["culprit"]["direction"] == "slower"]
        creeps += bool(slower)
        runs = sum(f["culprit"]["ab_runs"] for f in findings)
        said = _described(slower, commits)
        print(f"| creep 1% x 8 (commits 8-15) | {trial + 1} | creep 8-15 | {said} | {runs} | {wall:.0f} s |")
    print(f"\nculprit found: {found}/{trials}, within 8 ab runs: {within}/{trials}; creep reported: {creeps}/{trials}")
    return 0


def _described(findings: Sequence[dict[str, Any]], commits: Sequence[str]) -> str:
    """``creep 8-15``, ``commit 13``: what the report said, by commit number."""

    def number(commit: str | None) -> str:
        return str(commits.index(commit)) if commit in commits else "?"

    out = []
    for f in findings:
        c = f["culprit"]
        if c["kind"] == "commit":
            out.append(f"commit {number(c['commit'])}")
        else:
            out.append(f"{c['kind']} {number(c['first'])}-{number(c['last'])}")
    return ", ".join(out) or "nothing"


if __name__ == "__main__":
    raise SystemExit(main())
