"""Proof of the change-point detection (issue 25, item 5, first half): planted steps in this machine's real noise.

    python bench/changepoints.py                 # 8 processes x 15 A/A medians, 300 series of 100 commits, 2 min
    python bench/changepoints.py --quick         # 2 processes x 6 medians, 20 series: the smoke run of the tests
    python bench/changepoints.py --noise F.json  # reuse the A/A medians saved by an earlier run (--save-noise F.json)
    python bench/changepoints.py --anchored 120  # the noise of `history record --anchor`: 120 unchanged commits
    python bench/changepoints.py --anchored 60 --max-time 5 --device cuda   # the same on a GPU

**Anchored noise** (``--anchored N``). The same workload in a scratch git repository of N commits that
change nothing it runs, recorded by the real ``pytest-gpuperf history record --anchor <first commit>
--max-time T``: each commit's value is then the median of its paired rounds' time ratios against the
anchor's copy of the workload (``history/_anchored.py``), and its interval that median's. These values
are the A/A noise of an anchored history; the series and the planted changes are made of them as of
the medians (a step of 5% in the time is one of 5% in the ratio).

**Noise.** An unchanged workload (a small MLP forward, 1 thread, on the CPU) is measured with
``pytest_gpuperf.measuring.measure`` as ``history record`` measures a commit (``--max-time`` of rounds, the
median kept), ``--per-process`` times in each of ``--processes`` fresh processes, one after the other: the A/A
medians carry what differs from one process to the next (memory layout, the machine's other load) as well as
the sampling noise within one. Nothing is hard-coded: their spread is printed with the table, with the load
average. The table is then made again with the medians' deviations from their median halved and quartered
(the same shape, tails and drifts, less of it: a quieter machine), to show at what noise the targets are met.

**Series.** Each series is ``--length`` commits of these medians relative to their median, drawn at random
(``--block N``: in runs of N consecutive medians, so that the machine's slow drifts of load land on consecutive
commits, as when ``history record --last N`` measures N commits in a row), multiplied by a level that changes
at planted commits, at random places at least ``GAP`` commits apart:

- one step of 5% and one of 10% (each up or down at random): the steps that must be found;
- one step of 3% (up or down): not required; found or not, it is reported apart;
- one creep of +1% per commit over 8 commits (8.3% in all; ``--no-creep``: none).

**Truth.** A detected change at commit ``d`` matches a planted step at ``s`` when ``|d - s| <= margin``, and the
creep when ``d`` lies in it or within the margin either side; the margin is ``TOLERANCE`` (1 commit) and ``WIDE``
(5 commits, TCPDBench's default: a step found but placed a few commits off). *Recall* is the share of the >= 5%
steps matched. *Precision* is the share of detected changes that match anything planted (a 3% step or the creep
found is a true change, not a false alarm). How often the 3% step was found, and how often the creep was
reported, are columns of their own.

**Detectors**, on the same series:

- ours: ``pytest_gpuperf.history.find_steps`` with its default rule (E-divisive means and a t-test, as Otava);
- asv steps: ``asv.step_detect.detect_steps``, every boundary of its piecewise-constant fit whose jump is at
  least the same 2% as ours' ``min_magnitude`` (asv's graphs mark these);
- asv regressions: ``detect_regressions(detect_steps(y), threshold=0.05)``, what asv's regressions page lists
  (upward steps only: its recall is over the upward >= 5% steps, the 3% steps over the upward ones).

The table is Markdown, for bench/evidence/history.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from asv import step_detect

from pytest_gpuperf.history import ChangeRule, find_steps
from pytest_gpuperf.measuring import summarize

GAP: Final = 15  # commits between planted changes, at least
TOLERANCE: Final = 1  # commits a detection may be off a planted step
WIDE: Final = 5  # the wider margin (TCPDBench's default): a step found but placed a few commits off
SCALES: Final = (1.0, 0.5, 0.25)  # the measured noise, and its deviations halved and quartered
CREEP: Final = (1.01, 8)  # per commit, commits
CI: Final = 0.99  # asv keeps each result's 99% interval, and weighs the points of its fit by it
MIN_JUMP: Final = ChangeRule().min_magnitude  # the jump asv's boundaries must have, as ours


# ---------------------------------------------------------------- the A/A noise


def worker(count: int, max_time: float) -> None:
    """Print ``count`` medians of the unchanged workload, one JSON number a line (run in a process of its own)."""
    import torch

    from pytest_gpuperf.measuring import measure

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
    x = torch.randn(64, 256)

    def step() -> object:
        with torch.no_grad():
            return model(x)

    for _ in range(count):
        m = measure(step, threads=1, max_time=max_time, warmup_time=0.1, memory=False, profile="off")
        s = summarize(m.samples, CI)
        width = None if s.ci.falls_short(CI) else (s.ci.high - s.ci.low) / s.median
        print(json.dumps([s.median, width]), flush=True)


@dataclass(frozen=True)
class Median:
    """One A/A median, and the width of its 99% interval relative to it (None: too few samples for one), from
    which asv weighs a point (``asv._stats.get_weight``: 2 / width), as its graphs do."""

    value: float
    width: float | None


def collect_noise(processes: int, per_process: int, max_time: float) -> list[Median]:
    medians: list[Median] = []
    for i in range(processes):
        done = subprocess.run(
            [sys.executable, __file__, "--worker", str(per_process), "--max-time", str(max_time)],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if done.returncode != 0:
            raise SystemExit(f"noise worker {i} failed (exit {done.returncode}):\n{done.stderr}")
        medians += [read_median(line) for line in done.stdout.splitlines()]
        print(f"noise: process {i + 1} of {processes}: {per_process} medians", file=sys.stderr, flush=True)
    return medians


_MLP_WORKLOADS: Final = '''\
"""The unchanged workload of the A/A noise: the same MLP forward as bench/changepoints.py's worker."""

import torch

from pytest_gpuperf import Step, Workload


def _build(device, size):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).to(device)
    x = torch.randn(64, 256, device=device)

    def step():
        with torch.no_grad():
            return model(x)

    return Step(step, {"items": 64})


WORKLOADS = {"mlp": Workload("mlp", _build)}
'''
MACHINE: Final = "aa-box"


def collect_anchored_noise(commits: int, max_time: float, where: Path, device: str = "cpu") -> list[Median]:
    """The ratios ``history record --anchor`` records for ``commits`` commits of an unchanged workload."""
    from pytest_gpuperf.history import commit_order, points_of, read_results

    repo = where / "repo"
    (repo / "perf").mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "perf" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "perf" / "workloads.py").write_text(_MLP_WORKLOADS, encoding="utf-8")
    (repo / ".gitignore").write_text(".asv/\n", encoding="utf-8")
    for number in range(commits):
        (repo / "NOTES").write_text(f"commit {number}: the workload is unchanged\n", encoding="utf-8")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "--no-gpg-sign", "-m", f"commit {number}"], check=True)
    order = commit_order(repo, "main")
    command = [
        sys.executable, "-m", "pytest_gpuperf.cli", "history", "record", "--repo", str(repo), "--anchor", order[0],
        "--last", str(commits), "--max-time", str(max_time), "--device", device, "--workloads", "perf/workloads.py",
        "--machine", MACHINE, "--no-publish", "-q",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"history record --anchor failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    medians = []
    for commit in order:
        (path,) = (repo / ".asv" / "pytest" / "results" / MACHINE).glob(f"{commit[:8]}-*.json")
        (point,) = points_of(read_results(path), f"ab_vs_{order[0][:8]}.mlp").values()
        width = None if point.ci_low is None or point.ci_high is None else (point.ci_high - point.ci_low) / point.median
        medians.append(Median(point.median, width))
    return medians


def read_median(text: str) -> Median:
    value, width = json.loads(text)
    return Median(float(value), None if width is None else float(width))


# ---------------------------------------------------------------- series with planted changes


@dataclass(frozen=True)
class Planted:
    kind: str  # "step" or "creep"
    index: int  # the first commit at the new level (the creep: its first commit)
    size: float  # the step's ratio (after / before); the creep's total
    length: int = 1  # commits the change takes


@dataclass(frozen=True)
class Trial:
    values: tuple[float, ...]
    weights: tuple[float | None, ...]  # asv's weight of each point: 2 / the width of its 99% interval
    planted: tuple[Planted, ...]


def bootstrap(noise: Sequence[Median], length: int, rng: random.Random, block: int) -> list[Median]:
    out: list[Median] = []
    while len(out) < length:
        start = rng.randrange(len(noise))
        out += [noise[(start + k) % len(noise)] for k in range(block)]
    return out[:length]


def plant(length: int, rng: random.Random, creep: bool) -> tuple[Planted, ...]:
    sizes = [1.05, 1.10, 1.03]
    changes = [("step", s if rng.random() < 0.5 else 1 / s, 1) for s in sizes]
    changes += [("creep", CREEP[0], CREEP[1])] if creep else []
    rng.shuffle(changes)
    # places: each change's span plus GAP commits before the next; the slack spread at random
    room = length - GAP - sum(span + GAP for _, _, span in changes)
    cuts = sorted(rng.randrange(room + 1) for _ in changes)
    out, at = [], GAP
    for (kind, size, span), extra in zip(changes, cuts, strict=True):
        index = at + extra
        out.append(Planted(kind, index, size**span if kind == "creep" else size, span))
        at += span + GAP
    return tuple(out)


def level_at(planted: Sequence[Planted], i: int) -> float:
    level = 1.0
    for p in planted:
        if p.kind == "step" and i >= p.index:
            level *= p.size
        elif p.kind == "creep" and i >= p.index:
            level *= CREEP[0] ** min(i - p.index + 1, p.length)
    return level


def trials(noise: Sequence[Median], count: int, length: int, seed: int, block: int, creep: bool) -> list[Trial]:
    mid = middle(noise)
    relative = [Median(m.value / mid, m.width) for m in noise]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        planted = plant(length, rng, creep)
        base = bootstrap(relative, length, rng, block)
        values = tuple(b.value * level_at(planted, i) for i, b in enumerate(base))
        weights = tuple(None if b.width is None else 2 / (b.width * v) for b, v in zip(base, values, strict=True))
        out.append(Trial(values, weights, planted))
    return out


def middle(noise: Sequence[Median]) -> float:
    return sorted(m.value for m in noise)[len(noise) // 2]


# ---------------------------------------------------------------- detectors and scoring


def ours(values: Sequence[float], weights: Sequence[float | None]) -> list[int]:
    return [s.index for s in find_steps(values)]  # the weights are asv's: ours tests the points themselves


def asv_steps(values: Sequence[float], weights: Sequence[float | None]) -> list[int]:
    steps = step_detect.detect_steps(list(values), list(weights))
    return [
        right[0]
        for left, right in itertools.pairwise(steps)
        if abs(right[2] / left[2] - 1) >= MIN_JUMP or abs(left[2] / right[2] - 1) >= MIN_JUMP
    ]


def asv_regressions(values: Sequence[float], weights: Sequence[float | None]) -> list[int]:
    steps = step_detect.detect_steps(list(values), list(weights))
    _, _, positions = step_detect.detect_regressions(steps, threshold=0.05)
    return [after for _, after, _, _ in positions or ()]


DETECTORS: Final[dict[str, Callable[[Sequence[float], Sequence[float | None]], list[int]]]] = {
    "ours (E-divisive + t-test)": ours,
    "asv detect_steps (jumps >= 2%)": asv_steps,
    "asv regressions page (5%)": asv_regressions,
}


def matches(d: int, p: Planted, margin: int) -> bool:
    if p.kind == "creep":
        return p.index - margin <= d <= p.index + p.length - 1 + margin
    return abs(d - p.index) <= margin


def is_small(p: Planted) -> bool:
    return p.kind == "step" and max(p.size, 1 / p.size) < 1.04


@dataclass
class Score:
    """One detector over the series, at one margin (commits a detection may be off what was planted)."""

    margin: int
    must: int = 0  # planted >= 5% steps (the regressions page: upward ones only)
    found: int = 0
    exact: int = 0  # found at their very commit
    detections: int = 0
    true: int = 0
    small: int = 0  # 3% steps planted
    small_found: int = 0
    creeps: int = 0
    creeps_found: int = 0

    def add(self, trial: Trial, detected: Sequence[int], upward_only: bool) -> None:
        for p in trial.planted:
            if upward_only and p.size < 1:
                continue
            hit = any(matches(d, p, self.margin) for d in detected)
            if p.kind == "creep":
                self.creeps += 1
                self.creeps_found += hit
            elif is_small(p):
                self.small += 1
                self.small_found += hit
            else:
                self.must += 1
                self.found += hit
                self.exact += p.index in detected
        self.detections += len(detected)
        self.true += sum(any(matches(d, p, self.margin) for p in trial.planted) for d in detected)


def ratio(a: int, b: int) -> str:
    return f"{a / b:.3f} ({a}/{b})" if b else "n/a"


HEAD: Final = (
    "noise",
    "detector",
    f"recall, steps >= 5% (+-{TOLERANCE})",
    f"precision (+-{TOLERANCE})",
    f"recall (+-{WIDE})",
    f"precision (+-{WIDE})",
    "at the exact commit",
    f"3% steps found (+-{WIDE})",
    "creep reported",
    "seconds",
)


def row(noise: str, name: str, near: Score, wide: Score, seconds: float) -> str:
    cells = [
        noise,
        name,
        ratio(near.found, near.must),
        ratio(near.true, near.detections),
        ratio(wide.found, wide.must),
        ratio(wide.true, wide.detections),
        ratio(near.exact, near.must),
        ratio(wide.small_found, wide.small),
        ratio(near.creeps_found, near.creeps),
        f"{seconds:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def spread(noise: Sequence[Median], ratios: bool = False) -> str:
    data = sorted(m.value for m in noise)
    mid = data[len(data) // 2]
    q1, q3 = data[len(data) // 4], data[(3 * len(data)) // 4]
    mean = math.fsum(data) / len(data)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in data) / (len(data) - 1))
    return (
        f"{len(data)} A/A {'ratios' if ratios else 'medians'}: median "
        f"{f'{mid:.4f}' if ratios else f'{mid * 1e6:.1f} us'}, IQR {100 * (q3 - q1) / mid:.2f}% of it, "
        f"standard deviation {100 * sd / mean:.2f}%, min {100 * (data[0] / mid - 1):+.1f}%, "
        f"max {100 * (data[-1] / mid - 1):+.1f}%; the 99% interval of each median: {interval_widths(noise)}"
    )


def interval_widths(noise: Sequence[Median]) -> str:
    widths = sorted(m.width for m in noise if m.width is not None)
    if not widths:
        return "none (too few samples)"
    return f"{100 * widths[len(widths) // 2]:.1f}% wide (median), none for {len(noise) - len(widths)}"


def scaled(noise: Sequence[Median], factor: float) -> list[Median]:
    """The medians' deviations from their median times ``factor``: the same shape (tails, drifts), less of it;
    their intervals narrowed as much."""
    mid = middle(noise)
    return [
        Median(mid * (1 + factor * (m.value / mid - 1)), None if m.width is None else m.width * factor) for m in noise
    ]


# ---------------------------------------------------------------- main


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="2 processes x 6 medians, 20 series (the smoke run)")
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--per-process", type=int, default=15)
    p.add_argument("--max-time", type=float, default=0.3, help="seconds of rounds per A/A median")
    p.add_argument("--series", type=int, default=300)
    p.add_argument("--length", type=int, default=100, help="commits per series")
    p.add_argument("--seed", type=int, default=25)
    p.add_argument("--block", type=int, default=1, help="draw the noise in blocks of this many consecutive medians")
    p.add_argument("--no-creep", action="store_true", help="plant no creep (asv's fit sees no step beside one)")
    p.add_argument("--noise", type=Path, help="read the A/A medians from this JSON list instead of measuring")
    p.add_argument(
        "--anchored",
        type=int,
        metavar="N",
        help="measure the noise as `history record --anchor` records it, over N unchanged commits (--max-time each)",
    )
    p.add_argument("--device", default="cpu", help="with --anchored: the device ab measures on (cuda on a GPU)")
    p.add_argument("--save-noise", type=Path, help="write the A/A medians measured to this JSON list")
    p.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.max_time)
        return 0
    if args.quick:
        args.processes, args.per_process, args.series, args.max_time = 2, 6, 20, 0.15
    started = time.perf_counter()
    load = os.getloadavg()[0]
    ratios = bool(args.anchored)
    if args.noise:
        saved = json.loads(args.noise.read_text())
        if isinstance(saved, dict):  # {"ratios": bool, "medians": [...]}; a plain list: medians of seconds
            ratios, saved = bool(saved["ratios"]), saved["medians"]
        noise = [read_median(json.dumps(v)) for v in saved]
        source = f"read from {args.noise}"
    elif args.anchored:
        with tempfile.TemporaryDirectory(prefix="changepoints-") as where:
            noise = collect_anchored_noise(args.anchored, args.max_time, Path(where), args.device)
        load = max(load, os.getloadavg()[0])
        source = (
            f"history record --anchor over {args.anchored} unchanged commits on {args.device}, {args.max_time:g} s of "
            f"paired rounds each, {time.perf_counter() - started:.0f} s, load average {load:.1f}"
        )
    else:
        noise = collect_noise(args.processes, args.per_process, args.max_time)
        load = max(load, os.getloadavg()[0])
        source = (
            f"{args.processes} processes x {args.per_process}, {args.max_time:g} s of rounds each, "
            f"{time.perf_counter() - started:.0f} s, load average {load:.1f}"
        )
    if args.save_noise:
        medians = [[m.value, m.width] for m in noise]
        args.save_noise.write_text(json.dumps({"ratios": ratios, "medians": medians} if ratios else medians) + "\n")
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(["python bench/changepoints.py", *sys.argv[1:]])
    on = "the CPU" if not args.anchored or args.device == "cpu" else args.device
    print(f"`{command}` ({when}, {platform.node()}, {os.cpu_count()} CPUs, torch on {on})")
    print(f"noise: {spread(noise, ratios=ratios)} ({source})")
    creep = "" if args.no_creep else ", a creep of +1%/commit over 8 commits"
    draws = "each commit an independent draw" if args.block == 1 else f"drawn in blocks of {args.block} commits"
    print(
        f"{args.series} series of {args.length} commits per noise level, each: steps of 5%, 10% and 3% (up or down "
        f"at random){creep}, at least {GAP} commits apart; the noise {draws}"
    )
    print()
    print("| " + " | ".join(HEAD) + " |")
    print("|" + " --- |" * len(HEAD))
    verdicts = []
    for factor in SCALES:
        series = trials(scaled(noise, factor), args.series, args.length, args.seed, args.block, not args.no_creep)
        label = "as measured" if factor == 1 else f"x{factor:g}"
        for name, detect in DETECTORS.items():
            near, wide = Score(TOLERANCE), Score(WIDE)
            t0 = time.perf_counter()
            found = [detect(t.values, t.weights) for t in series]
            seconds = time.perf_counter() - t0
            for trial, detected in zip(series, found, strict=True):
                for score in (near, wide):
                    score.add(trial, detected, upward_only=name.startswith("asv regressions"))
            print(row(label, name, near, wide, seconds), flush=True)
            if name.startswith("ours"):
                verdicts.append(f"{label}: {judge(near)} within {TOLERANCE} commit, {judge(wide)} within {WIDE}")
    print()
    print("target, recall and precision >= 0.9 for ours: " + "; ".join(verdicts))
    return 0


def judge(s: Score) -> str:
    ok = s.must and s.found >= 0.9 * s.must and s.detections and s.true >= 0.9 * s.detections
    return "met" if ok else "MISSED"


if __name__ == "__main__":
    raise SystemExit(main())
