"""Evidence for the gates: false positives on A/A pairs and detection of planted 2%, 3%, 5% and 10% slowdowns,
next to pytest-benchmark's and asv's rules applied to the same measurements, and for ``ab`` the detection rate
each trial's smallest detectable change predicts beside the one observed (issue 38, item 4).

    python bench/gate_power.py --trials 40                                      # ab (default), ~35 min
    python bench/gate_power.py --threads 1 --protocol sequential                # stored baseline, ~25 min
    python bench/gate_power.py --threads 1 --protocol interleaved               # ~25 min
    python bench/gate_power.py --trials 4                                       # a quick look
    python bench/gate_power.py --trials 60 --conditions A/A --load 2            # ab's false alarms, both CPUs busy
    python bench/gate_power.py --trials 40 --conditions A/A --load 1 --bursts 2 # a load that comes and goes
    python bench/gate_power.py --protocol suite --trials 40                     # A/A of every suite workload

The step is 20 matmuls of a 64x1024 block by a 1024x1024 matrix (a 1024^3 matmul and a
quarter, in blocks); B does more rows of them while declaring the same work, as a code
change that makes the step slower would: 26 or 38 rows more (one more matmul of a
26x1024 or 38x1024 block, about 2% and 3%), or one or two whole blocks (5%, 10%).

Protocols, one trial each:

- ab (the interleaved A/B gate, the default): a tiny git repository whose commits are
  A, A' (a comment changed) and B +2% to +10% (the extra rows) holds the step
  as a workload (``perf/workloads.py``); each trial runs ``python -m pytest_gpuperf ab
  --base A --head X`` for X = A', B +5%, B +10% in random order, one process each
  (``--threads`` sets its ``--threads``; by default ``auto``, 1 on a CPU; ``--confirm 0``, so
  that each verdict is its paired rounds' own), and counts exit statuses; ``--json`` keeps
  each run's paired rounds, to which the other rules are applied.
- sequential (the stored-baseline gate of a pull request): three pytest sessions of the
  step saved as that trial's baseline (``--gpuperf-save --gpuperf-rounds=2``), then in
  random order the same step (A/A) and the step with 5% and 10% more work (B), each
  compared with the baseline by ``pytest --gpuperf-compare``, which measures a record
  that looks slower again in up to 4 fresh processes; their exit statuses are the
  gate's verdicts. Every process is one pytest session of the plugin
  (``--gpuperf-memory=off``; ``--threads`` sets ``--gpuperf-threads``).
- suite (issue 38, item 6: a suite of rows judged as one): ``python -m pytest_gpuperf ab
  --base HEAD --head HEAD`` of this clone, every workload of the CPU suites, one command a
  trial; per trial whether any row was called slower or faster (a false alarm: the code is
  the same), beside whether the first pass alone would have (its suspects, before ab's
  confirmation in fresh builds), the suspects and the wall time.
- interleaved (the baseline's code measured again next to the candidate's): three
  rounds, each one session of the baseline and of every candidate in random order
  (``--gpuperf-rounds=2``); judged as ``python -m pytest_gpuperf compare`` judges three
  runs against three.

The same measurements (the raw samples in each session's results file, or the base's and
the head's times of the same paired rounds for ab) are also judged by

- the gate on the first measurement of one session each (no rounds, no confirmation);
- pytest-benchmark's ``--benchmark-compare-fail=mean:5%``: fail when the mean of the
  samples is more than 5% above the baseline's (its own ``PercentageRegressionCheck``);
- asv's rule: slower when ``asv._stats.is_different`` (Mann-Whitney U at p < 0.002 on the
  samples) and the median is above 1.1 times the baseline's (``asv compare``'s factor);

given one session each, and all sessions' samples pooled (asv pools its processes).
Last, for every protocol, the power table: per condition, the smallest change each trial
could see (``gate.detectable``: ab's ``--json`` rows, or the stored route's estimate of the
trial's runs), the detection rate that predicts for a change the size of the condition's
median ratio, and the rate observed (trials whose interval's low end is above 1).
Background load is reported as measured by the gate itself while sampling (sequential,
interleaved) and as the load average (all). ``--load N`` adds N busy loops (``while True:
pass``, one process each) for the whole run, so that the figures hold under heavy load, or with
``--bursts S`` loops that come and go (busy, then idle, each for a time of mean S seconds: ab's
paired rounds then cluster, and the table shows ab's interval beside the one that treats rounds as
independent draws);
``--conditions`` runs only the conditions named (``A/A`` alone: the false-alarm rate).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from asv import _stats as asv_stats
from pytest_benchmark import utils as pytest_benchmark_utils
from tabulate import tabulate

from pytest_gpuperf.gate import POWER, compare_runs, detectable, disturbed, tolerance_for, verdict_for
from pytest_gpuperf.measuring import Estimate, median_ci, t_quantile, t_two_sided_p, values
from pytest_gpuperf.results import Record, Run, load_run

ROUNDS = 3
#: the conditions of every trial (``--conditions`` keeps some): extra rows beyond 20 blocks of 64
CONDITIONS = {"A/A": 0, "B +2%": 26, "B +3%": 38, "B +5%": 64, "B +10%": 128}
COLUMNS = {c: "A/A flagged (false +)" if c == "A/A" else f"{c} caught" for c in CONDITIONS}
#: one busy loop of ``--load``
SPINNER = "while True: pass"
#: one busy loop of ``--load`` under ``--bursts S``: busy for a time drawn from an exponential of mean S seconds,
#: then idle for another such time, and so on (a load that comes and goes, issue 38 item 5)
BURSTY = """
import random, sys, time
mean = float(sys.argv[1])
while True:
    until = time.monotonic() + random.expovariate(1.0 / mean)
    while time.monotonic() < until:
        pass
    time.sleep(random.expovariate(1.0 / mean))
"""

WORKER = """
import os

import torch

BLOCKS = 20
EXTRA = int(os.environ.get("GATE_POWER_EXTRA_ROWS", "0"))


def test_step(gpuperf):
    a = torch.randn(64, 1024)
    b = torch.randn(1024, 1024)
    out = torch.empty(64, 1024)
    full, part = divmod(EXTRA, 64)
    blocks = BLOCKS + full

    def step():
        for _ in range(blocks):
            torch.mm(a, b, out=out)
        if part:
            torch.mm(a[:part], b, out=out[:part])

    # The declared work stays that of 20 blocks: B is a change that makes the same step slower.
    gpuperf.measure(step, flops=2.0 * 64 * 1024 * 1024 * BLOCKS)
"""


@dataclass
class Trial:
    base: list[Run] = field(default_factory=list)
    #: condition -> the candidate's runs (one in the sequential protocol, ROUNDS when interleaved)
    heads: dict[str, list[Run]] = field(default_factory=dict)
    #: condition -> the pytest gate's exit status (sequential protocol)
    exit_status: dict[str, int] = field(default_factory=dict)


OPTIONS: list[str] = ["--gpuperf-device=cpu", "--gpuperf-memory=off"]


def run_pytest(workdir: Path, extra_rows: int, args: Sequence[str]) -> int:
    env = {**os.environ, "GATE_POWER_EXTRA_ROWS": str(extra_rows)}
    command = [sys.executable, "-m", "pytest", "test_step.py", "-q", "-p", "no:cacheprovider"]
    command += [*OPTIONS, *args]
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        sys.exit(f"worker failed with status {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.returncode


def slug(label: str) -> str:
    return label.replace("/", "").replace(" ", "").replace("%", "")


def run_sequential(workdir: Path, index: int, rng: random.Random) -> Trial:
    """Three baseline sessions, then each candidate judged by ``pytest --gpuperf-compare`` (a PR gate)."""
    trial = Trial()
    name = f"trial{index}"
    for round_ in range(ROUNDS):
        out = workdir / f"{name}-base{round_}.json"
        run_pytest(workdir, 0, [f"--gpuperf-save={name}", "--gpuperf-rounds=2", f"--gpuperf-json={out}"])
        trial.base.append(load_run(out))
    order = list(CONDITIONS)
    rng.shuffle(order)
    for condition in order:
        out = workdir / f"{name}-{slug(condition)}.json"
        status = run_pytest(workdir, CONDITIONS[condition], [f"--gpuperf-compare={name}", f"--gpuperf-json={out}"])
        trial.heads[condition] = [load_run(out)]
        trial.exit_status[condition] = status
    return trial


def run_interleaved(workdir: Path, index: int, rng: random.Random) -> Trial:
    """Three rounds; each runs the baseline and every candidate once, in random order, one session each."""
    trial = Trial(heads={c: [] for c in CONDITIONS})
    for round_ in range(ROUNDS):
        order = ["base", *CONDITIONS]
        rng.shuffle(order)
        for label in order:
            out = workdir / f"trial{index}-{slug(label)}{round_}.json"
            run_pytest(workdir, CONDITIONS.get(label, 0), ["--gpuperf-rounds=2", f"--gpuperf-json={out}"])
            (trial.base if label == "base" else trial.heads[label]).append(load_run(out))
    return trial


# ---------------------------------------------------------------- the ab protocol

AB_WORKLOADS = """\
\"\"\"The gate_power step as a workload: 20 matmuls of a 64x1024 block by a 1024x1024 matrix.\"\"\"

import torch

from pytest_gpuperf import Step, Workload

BLOCKS = 20
EXTRA = {extra}  # planted: extra rows of the same step; the declared work stays that of BLOCKS
# {comment}


def build(device, size):
    a = torch.randn(64, 1024, device=device)
    b = torch.randn(1024, 1024, device=device)
    out = torch.empty(64, 1024, device=device)
    full, part = divmod(EXTRA, 64)
    blocks = BLOCKS + full

    def step():
        for _ in range(blocks):
            torch.mm(a, b, out=out)
        if part:
            torch.mm(a[:part], b, out=out[:part])

    return Step(step, work={{"FLOP": 2.0 * 64 * 1024 * 1024 * BLOCKS}})


WORKLOADS = {{"mm_blocks": Workload("mm_blocks", build, "20 x mm(64x1024, 1024x1024)")}}
"""
#: condition -> the tag of its head commit in the ab repository (base: tag "a")
AB_HEADS = {c: "a2" if c == "A/A" else "b" + slug(c)[2:] for c in CONDITIONS}


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "gate_power", "GIT_AUTHOR_EMAIL": "gate_power@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": env["GIT_AUTHOR_NAME"], "GIT_COMMITTER_EMAIL": env["GIT_AUTHOR_EMAIL"]}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def make_ab_repo(repo: Path) -> None:
    """Commits A, A' (a comment changed) and B at each planted size (extra rows), tagged a, a2, b2 ... b10."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "perf").mkdir()
    (repo / "perf" / "__init__.py").write_text("")
    commits = [("a", 0, "variant A"), ("a2", 0, "variant A, the comment reworded")]
    commits += [(AB_HEADS[c], rows, "B") for c, rows in CONDITIONS.items() if rows]
    for tag, extra, comment in commits:
        (repo / "perf" / "workloads.py").write_text(AB_WORKLOADS.format(extra=extra, comment=comment))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"{tag}: {comment}, {extra} extra rows")
        _git(repo, "tag", tag)


@dataclass
class AbTrial:
    #: condition -> the ab command's exit status
    exit_status: dict[str, int] = field(default_factory=dict)
    #: condition -> the mm_blocks entry of its --json file (ratio, verdict, base and head times per round)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: condition -> wall seconds of the command
    seconds: dict[str, float] = field(default_factory=dict)
    #: condition -> the 1-minute load average when the command ended
    load: dict[str, float] = field(default_factory=dict)


#: ``--confirm 0``: the power table judges the paired rounds' own interval, as each trial printed it; the
#: confirmation of suspects in fresh builds is measured by the suite protocol
AB_OPTIONS: list[str] = ["--device", "cpu", "--workloads", "perf/workloads.py", "--confirm", "0"]


def run_ab(workdir: Path, index: int, rng: random.Random) -> AbTrial:
    """``python -m pytest_gpuperf ab --base a --head X`` for every condition, in random order."""
    trial = AbTrial()
    order = list(CONDITIONS)
    rng.shuffle(order)
    for condition in order:
        out = workdir / f"trial{index}-{slug(condition)}.json"
        command = [sys.executable, "-m", "pytest_gpuperf", "ab", "--repo", str(workdir / "repo"), "--base", "a"]
        command += ["--head", AB_HEADS[condition], *AB_OPTIONS, "--json", str(out)]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):
            sys.exit(f"ab failed with status {done.returncode}:\n{done.stdout}\n{done.stderr}")
        trial.seconds[condition] = time.perf_counter() - started
        trial.load[condition] = os.getloadavg()[0]
        trial.exit_status[condition] = done.returncode
        (trial.results[condition],) = json.loads(out.read_text())["results"]
    return trial


#: this clone, whose suites' workloads the suite protocol runs against themselves
CLONE = Path(__file__).resolve().parents[1]


@dataclass
class SuiteTrial:
    """One A/A ab command of every suite workload: its exit status, wall seconds, load after, and by workload
    its verdict and whether its first pass made it a suspect (before confirmation)."""

    exit_status: int
    seconds: float
    load: float
    verdicts: dict[str, str]
    suspects: list[str]
    confirm: dict[str, Any]

    @property
    def false_alarms(self) -> list[str]:
        return [name for name, verdict in self.verdicts.items() if verdict in ("slower", "faster")]


def run_suite(workdir: Path, index: int, rng: random.Random) -> SuiteTrial:
    """``python -m pytest_gpuperf ab --base HEAD --head HEAD`` of this clone: the same code on both sides."""
    out = workdir / f"trial{index}-suite.json"
    command = [sys.executable, "-m", "pytest_gpuperf", "ab", "--repo", str(CLONE), "--base", "HEAD", "--head", "HEAD"]
    command += ["--device", "cpu", "--json", str(out), *SUITE_OPTIONS]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        sys.exit(f"ab failed with status {done.returncode}:\n{done.stdout}\n{done.stderr}")
    data = json.loads(out.read_text())
    return SuiteTrial(
        done.returncode,
        time.perf_counter() - started,
        os.getloadavg()[0],
        {row["name"]: row["verdict"] for row in data["results"]},
        [row["name"] for row in data["results"] if row["first_pass"] is not None],
        data["confirm"],
    )


#: ab options of the suite protocol (``--threads``, ``--max-time``)
SUITE_OPTIONS: list[str] = []


def suite_report(trials: Sequence[SuiteTrial]) -> list[str]:
    """The A/A runs of the whole suite: how many raised any false alarm, with and without the confirmation."""
    n = len(trials)
    alarms = sum(bool(t.false_alarms) for t in trials)
    first = sum(bool(t.suspects) for t in trials)
    rows = [
        ("ab (suspects confirmed in fresh builds)", rate(alarms, n), rate(sum(t.exit_status == 1 for t in trials), n)),
        ("its first pass alone (every suspect)", rate(first, n), "-"),
    ]
    table = tabulate(rows, headers=("rule", "runs with any false alarm", "runs that failed"), tablefmt="github")
    flagged = sorted({name for t in trials for name in t.false_alarms})
    suspected: dict[str, int] = {}
    for t in trials:
        for name in t.suspects:
            suspected[name] = suspected.get(name, 0) + 1
    seconds, loads = [t.seconds for t in trials], [t.load for t in trials]
    return [
        table,
        "",
        f"rows per run: {statistics.median(len(t.verdicts) for t in trials):g} (median); suspects per run: mean "
        f"{statistics.fmean(len(t.suspects) for t in trials):.2f}, max {max(len(t.suspects) for t in trials)}",
        "suspects (runs): " + (", ".join(f"{k} ({v})" for k, v in sorted(suspected.items())) or "none"),
        "false alarms: " + (", ".join(flagged) or "none"),
        f"wall time per run: median {statistics.median(seconds):.0f} s, max {max(seconds):.0f} s; load average "
        f"(1 min) after each: mean {statistics.fmean(loads):.2f}, max {max(loads):.2f}",
    ]


def ab_rules() -> dict[tuple[str, str], Callable[[AbTrial, str], bool]]:
    def times(t: AbTrial, c: str, side: str) -> list[float]:
        return [float(x) for x in t.results[c][side]]

    def independent(t: AbTrial, c: str) -> bool:
        """ab's interval were its rounds independent draws (no serial widening): low end above 1."""
        ratios = [h / b for b, h in zip(times(t, c, "base"), times(t, c, "head"), strict=True)]
        return median_ci(ratios).low > 1.0

    return {
        ("pytest-gpuperf ab: exit status", "paired rounds, 1 process"): lambda t, c: t.exit_status[c] == 1,
        ("ab's interval: low end > 1", "paired rounds, 1 process"): lambda t, c: t.results[c]["ratio"]["low"] > 1.0,
        ("the same, rounds as independent", "same rounds"): independent,
        ("pytest-benchmark mean:5%", "same rounds"): lambda t, c: mean_check_fails(
            times(t, c, "base"), times(t, c, "head")
        ),
        ("asv MWU p<0.002 and 1.1x", "same rounds"): lambda t, c: asv_rule(times(t, c, "base"), times(t, c, "head")),
    }


def ab_summary(trials: Sequence[AbTrial]) -> list[str]:
    lines = []
    for condition in CONDITIONS:
        ratios = sorted(t.results[condition]["ratio"]["ratio"] for t in trials)
        widths = sorted((r["ratio"]["high"] - r["ratio"]["low"]) / 2 for t in trials for r in [t.results[condition]])
        rounds = sorted(t.results[condition]["rounds"] for t in trials)
        worth = [t.results[condition]["ratio"].get("independent_rounds") for t in trials]
        clustered = sum(
            w is not None and w < r - 0.5
            for w, r in zip(worth, (t.results[condition]["rounds"] for t in trials), strict=True)
        )
        spread = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        lines.append(
            f"{condition}: ratio head/base median {statistics.median(ratios):.3f} (SD over trials {spread:.3f}, "
            f"range {ratios[0]:.3f}-{ratios[-1]:.3f}), CI half-width median {statistics.median(widths):.3f}, "
            f"rounds median {statistics.median(rounds):g}, clustered (interval widened) in {clustered} of {len(trials)}"
        )
    seconds = [s for t in trials for s in t.seconds.values()]
    loads = [x for t in trials for x in t.load.values()]
    lines.append(f"ab commands: {len(seconds)}, wall time each median {statistics.median(seconds):.1f} s")
    lines.append(
        f"load average (1 min) after each ab command: mean {statistics.fmean(loads):.2f}, max {max(loads):.2f} "
        f"(2 CPUs; an ab command itself keeps one busy)"
    )
    return lines


@dataclass(frozen=True)
class Seen:
    """What one trial's estimate of one condition says: its ratio, whether its interval's low end is above 1 (a
    significant slowdown), the smallest change it could see (``gate.detectable``; None: too few rounds), and the
    interval's confidence and degrees of freedom (None: the normal's quantiles, as ab's interval)."""

    ratio: float
    significant: bool
    detectable: float | None
    confidence: float
    df: float | None
    #: the gate's verdict of this estimate under ``--tolerance auto`` (each row at what it can see, at least 2%)
    auto: str

    def predicted(self, change: float) -> float:
        """The chance that an interval this wide calls a change of ``change`` (a ratio) significantly slower."""
        if self.detectable is None:
            return 0.0
        df = math.inf if self.df is None else self.df
        q = t_quantile((1.0 + self.confidence) / 2.0, df)
        se = math.log1p(self.detectable) / (q + t_quantile(POWER, df))
        if se <= 0:
            return float(change > 1.0)
        x = q - math.log(change) / se  # P(T > x), T Student's t with df (the normal where df is infinite)
        tail = 1.0 - statistics.NormalDist().cdf(abs(x)) if math.isinf(df) else t_two_sided_p(x, df) / 2.0
        return tail if x >= 0 else 1.0 - tail


def ab_seen(trial: AbTrial, condition: str) -> Seen:
    """What the ab command's --json row printed."""
    row = trial.results[condition]
    r = row["ratio"]
    est = Estimate("time ratio head/base", r["ratio"], r["low"], r["high"], r["confidence"], row["rounds"])
    auto = "inconclusive" if r["detectable"] is None else _auto(est)  # None: too few rounds for the interval
    return Seen(r["ratio"], r["low"] > 1.0, r["detectable"], r["confidence"], None, auto)


def stored_seen(trial: Trial, condition: str) -> Seen:
    """What the stored route's estimate of this trial's runs says (``compare_runs``, as the gate verdicts table)."""
    (row,) = compare_runs(trial.base, trial.heads[condition]).rows
    est = row.estimate
    if est is None:
        raise SystemExit(f"{condition}: the gate compared nothing ({row.reason})")
    return Seen(est.value, est.low > 1.0, detectable(est), est.confidence, est.df, _auto(est))


def _auto(est: Estimate) -> str:
    """The gate's verdict of ``est`` under ``--tolerance auto``."""
    return verdict_for(est, tolerance_for(values.AutoTolerance(), est)).value


def power_table(trials: Sequence[Any], seen: Callable[[Any, str], Seen]) -> str:
    """Per condition: the ratio over trials, the smallest change each trial could see (``gate.detectable``), and the
    share of trials whose interval called head significantly slower, beside the share the trials' ``detectable``
    predicts for a change of the ratio's median over trials (issue 38, item 4)."""
    rows = []
    for condition in CONDITIONS:
        each = [seen(t, condition) for t in trials]
        change = statistics.median(e.ratio for e in each)  # the planted change, as the trials measured it
        sizes = sorted(e.detectable for e in each if e.detectable is not None)
        rows.append(
            (
                condition,
                f"{change:.3f}",
                f"{statistics.median(sizes):.1%}" if sizes else "-",
                f"{statistics.fmean(e.predicted(change) for e in each):.0%}",
                rate(sum(e.significant for e in each), len(each)),
                rate(sum(e.auto == "slower" for e in each), len(each)),
            )
        )
    headers = (
        *("condition", "ratio (median of trials)", "can see (median)", "predicted: significant", "observed"),
        "slower under auto",
    )
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def dump_ab(trials: Sequence[AbTrial], path: Path) -> None:
    data = [dataclasses.asdict(t) for t in trials]
    path.write_text(json.dumps(data) + "\n")


# ---------------------------------------------------------------- the rules


def first_only(runs: Sequence[Run]) -> list[Run]:
    """The runs without their extra rounds: what a gate without rounds or confirmation would see."""
    out = []
    for run in runs:
        records = [r.with_evidence(dataclasses.replace(r.evidence, rounds=(), runs=())) for r in run.records]
        out.append(dataclasses.replace(run, records=records))
    return out


def only_record(run: Run) -> Record:
    (record,) = run.records
    return record


def samples(runs: Sequence[Run]) -> list[float]:
    return [s for run in runs for s in only_record(run).measurement.samples]


def gate_verdict(base: Sequence[Run], head: Sequence[Run]) -> str:
    (row,) = compare_runs(base, head).rows
    return row.verdict.value


def mean_check_fails(base: Sequence[float], head: Sequence[float]) -> bool:
    """pytest-benchmark's ``--benchmark-compare-fail=mean:5%`` (its own check object)."""
    parse = cast(Callable[[str], Any], pytest_benchmark_utils.parse_compare_fail)
    check = parse("mean:5%")
    return bool(check.fails({"mean": statistics.fmean(head)}, {"mean": statistics.fmean(base)}))


def pytest_benchmark_fails(base: Sequence[Run], head: Sequence[Run]) -> bool:
    return mean_check_fails(samples(base), samples(head))


def _asv_stats(values: Sequence[float]) -> dict[str, float]:
    ci = median_ci(values, 0.99)
    return {"ci_99_a": ci.low, "ci_99_b": ci.high}


def asv_rule(a: Sequence[float], b: Sequence[float]) -> bool:
    """asv compare's rule: significantly different (Mann-Whitney U, p < 0.002) and b above 1.1 a."""
    different = asv_stats.is_different(a, b, _asv_stats(a), _asv_stats(b))
    return bool(different) and statistics.median(b) > 1.1 * statistics.median(a)


def asv_slower(base: Sequence[Run], head: Sequence[Run]) -> bool:
    return asv_rule(samples(base), samples(head))


Rule = Callable[[Trial, str], bool]


def rules(protocol: str) -> dict[tuple[str, str], Rule]:
    first: Rule = lambda t, c: gate_verdict(first_only(t.base[:1]), first_only(t.heads[c][:1])) == "slower"  # noqa: E731
    out: dict[tuple[str, str], Rule] = {}
    if protocol == "sequential":
        out[("pytest-gpuperf gate: pytest --gpuperf-compare exit status", "3 sessions x 2 rounds, then 1")] = (
            lambda t, c: t.exit_status[c] == 1
        )
    else:
        out[("pytest-gpuperf gate: python -m pytest_gpuperf compare", "3 vs 3 sessions, interleaved")] = lambda t, c: (
            gate_verdict(t.base, t.heads[c]) == "slower"
        )
    out[("pytest-gpuperf gate, first measurements only", "1 vs 1")] = first
    out[("pytest-benchmark mean:5%", "1 vs 1")] = lambda t, c: pytest_benchmark_fails(t.base[:1], t.heads[c][:1])
    out[("pytest-benchmark mean:5%", "pooled")] = lambda t, c: pytest_benchmark_fails(t.base, t.heads[c])
    out[("asv MWU p<0.002 and 1.1x", "1 vs 1")] = lambda t, c: asv_slower(t.base[:1], t.heads[c][:1])
    out[("asv MWU p<0.002 and 1.1x", "pooled")] = lambda t, c: asv_slower(t.base, t.heads[c])
    return out


def rate(hits: int, n: int) -> str:
    return f"{hits}/{n} ({hits / n:.0%})" if n else "-"


Judges = Mapping[tuple[str, str], Callable[[Any, str], bool]]


def results_table(judges: Judges, trials: Sequence[Any], what: str) -> str:
    """Rates per rule: how often each judge flagged each condition; ``what`` heads the second column."""
    rows = []
    for (rule, compared), judge in judges.items():
        cells = [rate(sum(judge(t, c) for t in trials), len(trials)) for c in CONDITIONS]
        rows.append((rule, compared, *cells))
    headers = ("rule", what, *(COLUMNS[c] for c in CONDITIONS))
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def verdict_table(trials: Sequence[Any], verdict: Callable[[Any, str], str], title: str) -> str:
    """How the gate's verdicts spread, per condition."""
    names = ("slower", "unattributed", "same-work", "inconclusive", "unchanged", "faster")
    rows = []
    for condition in CONDITIONS:
        verdicts = [verdict(t, condition) for t in trials]
        rows.append((condition, *(verdicts.count(v) for v in names)))
    return tabulate(rows, headers=(title, *names), tablefmt="github")


def conditions_summary(trials: Sequence[Trial]) -> list[str]:
    runs = [run for t in trials for run in (*t.base, *(r for rs in t.heads.values() for r in rs))]
    records = [only_record(run) for run in runs]
    loads = [r.evidence.load for r in records if r.evidence.load is not None]
    busy = sum(disturbed(r) for r in records)
    waits = [r.evidence.quiet_wait_s or 0.0 for r in records]
    lines = [
        f"processes: {len(runs)}; sampling windows disturbed by other processes: {busy} ({busy / len(runs):.0%})",
        f"background load while sampling (cores of {loads[0].cpus if loads else '?'}): "
        f"mean {statistics.fmean(x.background_cores for x in loads):.2f}, "
        f"max {max(x.background_cores for x in loads):.2f}"
        if loads
        else "background load: not measurable here",
        f"waited for a quiet machine before measuring: {sum(w > 0.3 for w in waits)} processes, "
        f"{sum(waits):.0f} s in all",
        f"session medians, all sessions: median {_quantile(records, 0.5):.2f} ms, "
        f"middle 80% {_quantile(records, 0.1):.2f}-{_quantile(records, 0.9):.2f} ms",
    ]
    for condition, extra in CONDITIONS.items():
        if extra:
            ratios = [
                statistics.median(only_record(r).measurement.median for r in t.heads[condition])
                / statistics.median(only_record(r).measurement.median for r in t.base)
                for t in trials
            ]
            lines.append(
                f"{condition}: ratio of median session medians, median over trials {statistics.median(ratios):.3f}x"
            )
    return lines


def _quantile(records: Sequence[Record], q: float) -> float:
    values = sorted(r.measurement.median for r in records)
    return values[min(len(values) - 1, int(q * len(values)))] * 1e3


def dump(trials: Sequence[Trial], path: Path) -> None:
    data = [
        {
            "base": [r.to_dict() for r in t.base],
            "heads": {c: [r.to_dict() for r in runs] for c, runs in t.heads.items()},
            "exit_status": t.exit_status,
        }
        for t in trials
    ]
    path.write_text(json.dumps(data) + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40, help="trials, each condition once (40)")
    parser.add_argument("--minutes", type=float, default=25.0, help="start no trial after this many minutes (25)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads of every process (ab: its --threads; else --gpuperf-threads; default: auto, 1 on a CPU)",
    )
    parser.add_argument("--max-time", default=None, help="ab: its --max-time (default: the command's, 5 s)")
    parser.add_argument(
        "--protocol",
        choices=("ab", "sequential", "interleaved", "suite"),
        default="ab",
        help="ab: python -m pytest_gpuperf ab, base and head in paired rounds of one process (default); "
        "sequential: baseline sessions, then each candidate under pytest --gpuperf-compare (a PR gate); "
        "interleaved: baseline and candidates alternate, three sessions each, judged by the compare command; "
        "suite: ab of this clone's suites against themselves (A/A), the run-wide false alarms",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep the results files here (default: temp)")
    parser.add_argument(
        "--conditions",
        default=",".join(CONDITIONS),
        help="comma-separated conditions to run in every trial (default: all; A/A alone gives the false alarms)",
    )
    parser.add_argument(
        "--load", type=int, default=0, help="busy loops (one process each) kept running during the whole run (0)"
    )
    parser.add_argument(
        "--bursts",
        type=float,
        default=None,
        metavar="SECONDS",
        help="the --load loops come and go: busy, then idle, each for a time drawn with this mean (default: always on)",
    )
    return parser


def _trials(args: argparse.Namespace, workdir: Path, start: float) -> list[Any]:
    rng = random.Random(args.seed)
    trials: list[Any] = []
    for i in range(args.trials):
        if time.perf_counter() - start > args.minutes * 60:
            print(f"time budget of {args.minutes:g} min reached after {i} trials", flush=True)
            break
        if args.protocol == "suite":
            suite_trial = run_suite(workdir, i, rng)
            trials.append(suite_trial)
            verdicts: dict[str, Any] = {"false alarms": suite_trial.false_alarms, "suspects": suite_trial.suspects}
        elif args.protocol == "ab":
            ab_trial = run_ab(workdir, i, rng)
            trials.append(ab_trial)
            verdicts = {c: f"{r['verdict']} {r['ratio']['ratio']:.3f}" for c, r in ab_trial.results.items()}
        else:
            trial = (run_sequential if args.protocol == "sequential" else run_interleaved)(workdir, i, rng)
            trials.append(trial)
            verdicts = {c: gate_verdict(trial.base, h) for c, h in trial.heads.items()}
        print(f"  trial {i + 1}: {verdicts} after {time.perf_counter() - start:.0f} s", flush=True)
    return trials


def _report(args: argparse.Namespace, trials: Sequence[Any], workdir: Path) -> None:
    if args.protocol == "suite":
        (workdir / "gate_power.json").write_text(json.dumps([dataclasses.asdict(t) for t in trials]) + "\n")
        print()
        for line in suite_report(trials):
            print(line)
        return
    if args.protocol == "ab":
        dump_ab(trials, workdir / "gate_power.json")
        tables = [
            results_table(ab_rules(), trials, "measurements"),
            verdict_table(trials, lambda t, c: str(t.results[c]["verdict"]), "ab verdicts"),
            power_table(trials, ab_seen),
        ]
        lines = ab_summary(trials)
    else:
        dump(trials, workdir / "gate_power.json")
        tables = [
            results_table(rules(args.protocol), trials, "runs compared"),
            verdict_table(trials, lambda t, c: gate_verdict(t.base, t.heads[c]), "gate verdicts"),
            power_table(trials, stored_seen),
        ]
        lines = conditions_summary(trials)
    for table in tables:
        print()
        print(table)
    print()
    for line in lines:
        print(line)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    chosen = [c.strip() for c in args.conditions.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in CONDITIONS]
    if unknown or not chosen or args.load < 0 or (args.bursts is not None and not args.bursts > 0):
        parser.error(f"--conditions takes some of {', '.join(CONDITIONS)}; --load a count >= 0; --bursts seconds > 0")
    for condition in [c for c in CONDITIONS if c not in chosen]:
        del CONDITIONS[condition]
    loop = [SPINNER] if args.bursts is None else [BURSTY, str(args.bursts)]
    spinners = [subprocess.Popen([sys.executable, "-c", *loop]) for _ in range(args.load)]
    try:
        return _run(args)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def _run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gate-power-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.protocol == "suite":
        SUITE_OPTIONS.extend(["--threads", str(args.threads)] if args.threads is not None else [])
        SUITE_OPTIONS.extend(["--max-time", str(args.max_time)] if args.max_time is not None else [])
    elif args.protocol == "ab":
        make_ab_repo(workdir / "repo")
        AB_OPTIONS.extend(["--threads", str(args.threads)] if args.threads is not None else [])
        AB_OPTIONS.extend(["--max-time", str(args.max_time)] if args.max_time is not None else [])
    else:
        OPTIONS.extend([f"--gpuperf-threads={args.threads}"] if args.threads is not None else [])
        (workdir / "test_step.py").write_text(textwrap.dedent(WORKER))
    load_before = os.getloadavg()
    threads = args.threads or "auto (1 on a CPU)"
    what = "A/A of every suite workload" if args.protocol == "suite" else ", ".join(CONDITIONS)
    bursts = "" if args.bursts is None else f" in bursts (mean {args.bursts:g} s on, {args.bursts:g} s off)"
    print(
        f"gate_power: {args.trials} trials of {what}, {args.protocol} protocol, threads: {threads}, "
        f"{args.load} busy loops{bursts}, "
        f"in {workdir}; load average {load_before[0]:.2f}"
    )
    trials = _trials(args, workdir, start)
    _report(args, trials, workdir)
    load_after = os.getloadavg()
    print(f"load average (1 min) at start {load_before[0]:.2f}, at end {load_after[0]:.2f}")
    print(f"raw data: {workdir / 'gate_power.json'}")
    print(f"wall time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
