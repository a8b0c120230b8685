"""Two costs of a count line, on the same profiles: the change of the op's time (the ranking's) against the change of
count times the smaller of the two sides' mean runs, judged on bench/count_ranking.py's twenty planted regressions and
on the planted matmul of docs/gating.md's MLP example (issue 35, item 1).

    python bench/count_costs.py              # 3 rounds: both sets and the MLP example twice each, 1.5 to 3 min
    python bench/count_costs.py --rounds 1   # one round, 30 to 60 s

(Wall times on this project's 2-vCPU machine, torch 2.13.0+cpu, 2026-12-02, at a load average of 2 to 4 from other
sessions. Run it with one vCPU kept busy by starting ``python3 -c 'while True: pass' &`` first. Results:
bench/evidence/count-ranking.md.)

A cost is read from few profiled calls (two a side), so one ``ab`` run's profiles would rank the lines differently
under another cost for two reasons: the cost, and the machine's noise in that run. Here each ``ab`` run is ranked
under every cost, so that each cost ranks the same profiles (a paired comparison: the machine's noise is the same
for all of them). The costs, of an op or kernel whose count per call changed (positive: time added):

- ``change``: the change of its time per call, head minus base (``measuring/_profile.py``'s, what ``ab`` prints);
- ``min-mean``: its change of count times the smaller of the two sides' mean runs (its time per call over its
  count per call), or the one side's where it ran on one side only;
- ``min of both``: the smaller of ``min-mean`` and ``change`` (a ``change`` that disagrees in sign: zero).

Each is ranked as ``_profile.rank`` ranks, the counts that grew before those that fell; ``min-mean, by size``
ranks ``min-mean`` by its size whatever its sign (main's order, before the counts that grew came first).

A round is one ``ab`` run of each of count_ranking.py's two sets (``--max-time 0.5``) and two of the MLP example
(a two-layer MLP training step, batch 128, 256-512-256, SGD, with ``h = h @ torch.eye(256)`` planted after the
model, ``--max-time 1``), in process, on the CPU. A set's row is a hit where its first count line names the planted
op (count_ranking.py's rule); the MLP's where it names ``aten::mm``. Printed: each ``ab`` run's figures under every
cost, with the load average, the figures behind the ``.repeat()`` row and the MLP's ``aten::mm`` (each side's mean
run, the change of time, the min-mean cost, and the copy that ``.repeat()`` adds), and the totals.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final

from count_ranking import SETS, Set, first_count_lines, head_tag, make_repo, names_planted_op
from planted import git
from tabulate import tabulate

from pytest_gpuperf.gate import AbOptions, Row, gate_lines, run_ab
from pytest_gpuperf.measuring._profile import (
    CATEGORIES,
    CountChange,
    WorkProfile,
    _moves_no_data,
    _relative,
    change_lines,
    compare_work,
    line_text,
)
from pytest_gpuperf.measuring._profile import rank as grew_first

MLP_BASE: Final = '''\
"""docs/gating.md's MLP example: a two-layer MLP training step; the head commit plants a matmul."""

import torch

from pytest_gpuperf import Step, Workload


def build(device, size):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(128, 256, device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        h = model(x)
        h.sum().backward()
        opt.step()

    return Step(step, work={"samples": 128.0})


WORKLOADS = {"mlp_train": Workload("mlp_train", build, "a two-layer MLP training step")}
'''
MLP_PLANTED: Final = ("        h = model(x)\n", "        h = model(x)\n        h = h @ torch.eye(256)\n")
#: ``ab --max-time`` of the MLP example (count-ranking.md's repeated runs of gating.md's command).
MLP_MAX_TIME: Final = 1.0
MLP_PER_ROUND: Final = 2

#: op or kernel key -> (time per call, count per call, mean run: time per call / count per call, None at count 0)
Stats = Mapping[str, tuple[float, float, float | None]]


def side_stats(profiles: Sequence[WorkProfile]) -> Stats | None:
    """Each op's and kernel's time and count per call, the mean over the profiles that kept times (as
    ``_profile._call_seconds``); None where none did."""
    timed = [
        p
        for p in profiles
        if p.level != "counts" and p.calls > 0 and all(s.seconds is not None for s in (*p.ops, *p.kernels))
    ]
    if not timed:
        return None
    seconds: dict[str, float] = {}
    counts: dict[str, float] = {}
    for p in timed:
        for prefix, stats in (("op", p.ops), ("kernel", p.kernels)):
            for s in stats:
                key = f"{prefix}:{s.name}"
                seconds[key] = seconds.get(key, 0.0) + (s.seconds or 0.0) / p.calls / len(timed)
                counts[key] = counts.get(key, 0.0) + s.count / p.calls / len(timed)
    return {k: (seconds[k], counts[k], seconds[k] / counts[k] if counts[k] else None) for k in seconds}


def min_mean(change: CountChange, base: Stats, head: Stats) -> float:
    """The change of count times the smaller side's mean run (the one side's, where the op ran on one only)."""
    means = [m for m in (base.get(change.key, (0.0, 0.0, None))[2], head.get(change.key, (0.0, 0.0, None))[2]) if m]
    delta = float(change.head - change.base)
    return delta * min(means) if means else 0.0


def both(change: CountChange, base: Stats, head: Stats) -> float:
    """The smaller of ``min_mean`` and the change of time, in the count's direction (zero where they disagree)."""
    cost, seconds = min_mean(change, base, head), change.seconds or 0.0
    return 0.0 if cost * seconds <= 0 else min(cost, seconds, key=abs)


def by_size(changes: Sequence[CountChange]) -> list[CountChange]:
    """Main's order: by the size of the cost, whatever its sign, then as ``rank`` (the ops that move no data last)."""
    order = {c: i for i, c in enumerate(CATEGORIES)}

    def key(c: CountChange) -> tuple[object, ...]:
        delta = abs(c.head - c.base)
        if _moves_no_data(c):
            return (order[c.category], 1, 0.0, 0, -delta, c.key)
        cost = -abs(c.seconds) if c.seconds is not None else 0.0
        return (order[c.category], 0, cost, -_relative(c), -delta, c.key)

    return sorted(changes, key=key)


Cost = Callable[[CountChange, Stats, Stats], float]
#: name -> (the cost, None for the change of time as compare_work costs it; the order)
COSTS: Final[Mapping[str, tuple[Cost | None, Callable[[Sequence[CountChange]], list[CountChange]]]]] = {
    "change": (None, grew_first),
    "min-mean": (min_mean, grew_first),
    "min-mean, by size": (min_mean, by_size),
    "min of both": (both, grew_first),
}


def first_lines(row: Row) -> dict[str, str | None]:
    """The row's first count line under each of ``COSTS``, from its profiles."""
    work = compare_work(row.base_profiles, row.head_profiles)
    if work is None or not work.changes:
        return dict.fromkeys(COSTS)
    base, head = side_stats(row.base_profiles), side_stats(row.head_profiles)
    out: dict[str, str | None] = {}
    for name, (cost, order) in COSTS.items():
        changes = list(work.changes)
        if cost is not None and base is not None and head is not None:
            changes = [replace(c, seconds=cost(c, base, head)) if c.seconds is not None else c for c in work.changes]
        out[name] = line_text(change_lines(order(changes))[0], False)
    return out


def figures(row: Row, key: str) -> str:
    """An op's mean run on each side, its change of time and its min-mean cost, in us (``-`` where it did not run)."""
    base, head = side_stats(row.base_profiles) or {}, side_stats(row.head_profiles) or {}
    b, h = base.get(key, (0.0, 0.0, None)), head.get(key, (0.0, 0.0, None))
    means = [m for m in (b[2], h[2]) if m]
    cost = (h[1] - b[1]) * min(means) if means else 0.0

    def us(value: float | None) -> str:
        return "-" if value is None else f"{value * 1e6:.0f}"

    return f"mean run {us(b[2])} / {us(h[2])} us, change {us(h[0] - b[0])} us, min-mean {us(cost)} us"


def run_set(s: Set, repo: Path) -> tuple[dict[str, int], str]:
    """One ``ab`` run of a set: each cost's hits, and (second set) the ``.repeat()`` row's figures."""
    options = AbOptions(
        base="a", head=head_tag(s), workloads=Path(s.path), repo=repo, device="cpu", max_time=0.5, trace="off"
    )
    result = run_ab(options, out=None).result
    shown = first_count_lines(gate_lines(result))
    rows = {row.test: row for row in result.rows}
    hits = dict.fromkeys(COSTS, 0)
    note = ""
    for planted in s.plants:
        row = rows.get(planted.name)
        if row is None:
            continue
        lines = first_lines(row)
        if lines["change"] != shown.get(planted.name):  # the change of time is what ab printed
            raise AssertionError(
                f"{planted.name}: re-ranked {lines['change']!r}, ab printed {shown.get(planted.name)!r}"
            )
        for name, line in lines.items():
            hits[name] += names_planted_op(line, s.targets[planted.name])
        if planted.name == "repeat":
            copy = (side_stats(row.head_profiles) or {}).get("op:aten::copy_", (0.0, 0.0, None))[0]
            note = f"repeat's aten::add 1 -> 3: {figures(row, 'op:aten::add')}; its aten::copy_ {copy * 1e6:.0f} us"
    return hits, note


def run_mlp(repo: Path) -> tuple[dict[str, str | None], str]:
    options = AbOptions(
        base="a", head="p", workloads=Path("perf/mlp.py"), repo=repo, device="cpu", max_time=MLP_MAX_TIME, trace="off"
    )
    (row,) = run_ab(options, out=None).result.rows
    return first_lines(row), f"aten::mm 3 -> 5: {figures(row, 'op:aten::mm')}"


def make_mlp_repo(repo: Path) -> None:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "perf").mkdir()
    (repo / "perf" / "__init__.py").write_text("")
    (repo / "perf" / "mlp.py").write_text(MLP_BASE)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a: the MLP")
    git(repo, "tag", "a")
    (repo / "perf" / "mlp.py").write_text(MLP_BASE.replace(*MLP_PLANTED))
    git(repo, "commit", "-q", "-am", "p: a matmul planted")
    git(repo, "tag", "p")


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds: both sets and the MLP twice each (3)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f"count costs: {args.rounds} round(s); load average {load()}", flush=True)
    runs: list[tuple[str, ...]] = []
    notes: list[str] = []
    totals = {name: {"planted.py": 0, "second": 0, "mlp": 0} for name in COSTS}
    with tempfile.TemporaryDirectory(prefix="count-costs-") as workdir:
        sets_repo, mlp_repo = Path(workdir) / "sets", Path(workdir) / "mlp"
        make_repo(sets_repo)
        make_mlp_repo(mlp_repo)
        for number in range(1, args.rounds + 1):
            for s in SETS:
                at, before = time.strftime("%H:%M:%S", time.gmtime()), load()
                hits, note = run_set(s, sets_repo)
                runs.append((str(number), at, f"{before} / {load()}", s.name, *(f"{hits[n]} of 10" for n in COSTS)))
                for name in COSTS:
                    totals[name][s.name] += hits[name]
                if note:
                    notes.append(f"round {number}, {at}: {note}")
            for _ in range(MLP_PER_ROUND):
                at, before = time.strftime("%H:%M:%S", time.gmtime()), load()
                lines, note = run_mlp(mlp_repo)
                runs.append((str(number), at, f"{before} / {load()}", "MLP", *(str(lines[n]) for n in COSTS)))
                for name in COSTS:
                    totals[name]["mlp"] += (lines[name] or "").startswith("aten::mm ")
                notes.append(f"round {number}, {at}: MLP's {note}")
            print(f"  round {number}: {time.perf_counter() - started:.0f} s", flush=True)
    print()
    headers = ("round", "UTC", "load average, start / end", "run", *COSTS)
    print(tabulate(runs, headers=headers, tablefmt="github", disable_numparse=True))
    print()
    for note in notes:
        print(note)
    print()
    mlp_runs = args.rounds * MLP_PER_ROUND
    for name, total in totals.items():
        print(
            f"{name}: planted.py {total['planted.py']} of {10 * args.rounds}, second {total['second']} of "
            f"{10 * args.rounds}, MLP aten::mm first in {total['mlp']} of {mlp_runs}"
        )
    print(f"load average (1 min) at end {load()}")
    print(f"wall time: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
