"""``ab``'s confirmation: the rows its first pass calls slower or faster, measured again in fresh builds.

The paired rounds of one workload share more than the machine: the imported workloads
modules, and whatever state a build of identical code lands in and keeps (where its
objects were placed, which side warmed the caches). An unchanged step has read 0.78 for a
whole run and 1.27 for the next, each with an interval that could not see it, and a run of
30 rows each judged at 95% alone raises a false alarm in many A/A runs by design.

So every row that the first pass calls slower or faster, or fails by a count or its peak
memory (a *suspect*), is measured again,
after all the others, in ``--confirm N`` fresh builds (3 by default): each side's workloads
module imported afresh, its step built and timed in paired rounds as before. The row's
verdict is the gate's rule (``verdict_for``) on one ratio of those builds (``pooled``): the
mean of their log ratios, with the spread between builds where it is larger than what
the builds' own intervals say (Student's t with N - 1 degrees of freedom), else those
intervals pooled. The first pass is left out of it: it was chosen for being extreme.
Its counts and peak memory are compared over every build of each side, the first pass's
too: a count that differs between a side's builds is varying, not a change.

Run-wide: each of the k suspects is confirmed at confidence 1 - 5%/k (Bonferroni), so
where the builds are independent of the first pass and of each other the chance that a run
raises any false alarm is at most 5%, however many workloads it has
(``tests/gate/test_ab_confirm.py`` plants a bias per build).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Final

from ..measuring import Estimate, Paired, counted, median, t_quantile, values
from ._ab_measure import Bench
from ._compare import Row, with_work
from ._evidence import work_difference
from ._rule import log_se, reason_for, tolerance_for, verdict_for
from ._verdicts import Verdict

__all__ = [
    "CONFIRM_BUILDS",
    "RUN_FALSE_ALARMS",
    "confirmed",
    "pooled",
    "run_confidence",
    "suspect",
]

#: Fresh builds each suspect is measured in (``ab --confirm``; 0: none).
CONFIRM_BUILDS: Final = 3
#: The chance, at most, that a run raises any false alarm, shared by its suspects (Bonferroni).
RUN_FALSE_ALARMS: Final = 0.05
_SPLIT: Final = {Verdict.SLOWER, Verdict.FASTER}


def suspect(row: Row, fail_on: frozenset[str]) -> bool:
    """Does the first pass call this row slower or faster by its time, or fail it by a count or its memory (what
    the noise, or a build's state, could make: a DataLoader's workers allocate a varying amount from process to
    process)?"""
    if row.estimate is None:
        return False
    return verdict_for(row.estimate, row.tolerance) in _SPLIT or bool(row.work_failing(fail_on))


def run_confidence(suspects: int) -> float:
    """The confidence each of ``suspects`` rows is confirmed at: the run's 5% shared among them."""
    return 1.0 - RUN_FALSE_ALARMS / max(1, suspects)


def pooled(estimates: Sequence[Estimate], confidence: float) -> Estimate:
    """One time ratio from the builds' ratios: their geometric mean, its interval at ``confidence`` from the spread
    between the builds (t, N - 1 df) where that is larger than the builds' own intervals say, else from those
    (the normal's quantile). Builds whose interval decides nothing count by their ratio alone."""
    if len(estimates) < 2:
        raise ValueError(f"pooling needs two builds or more, got {len(estimates)}")
    logs = [math.log(e.value) for e in estimates]
    n = len(logs)
    mean = math.fsum(logs) / n
    between = math.fsum((x - mean) ** 2 for x in logs) / (n - 1)
    within = [se * se for e in estimates if (se := log_se(e)) is not None]
    own = math.fsum(within) / len(within) if within else 0.0
    variance, df = (between, float(n - 1)) if between >= own else (own, None)
    half = t_quantile((1.0 + confidence) / 2.0, math.inf if df is None else df) * math.sqrt(variance / n)
    return Estimate(
        "time ratio head/base",
        math.exp(mean),
        math.exp(mean - half),
        math.exp(mean + half),
        confidence,
        n,
        spread=math.sqrt(between),
        df=df,
        nominal=confidence,
        counted="fresh builds",
    )


def confirmed(row: Row, builds: Sequence[Paired], failed: Sequence[str], bench: Bench, confidence: float) -> Row:
    """``row`` judged again on the ``pooled`` ratio of its fresh builds' paired rounds at ``confidence`` (the first
    pass's figures in its reason); inconclusive where fewer than two builds could be measured (``failed``: why)."""
    first = row.estimate
    assert first is not None  # a suspect has an estimate
    screened = f"first pass {first.value:.3f} [{first.low:.3f}, {first.high:.3f}]"
    total = len(builds) + len(failed)
    if len(builds) < 2:
        why = failed[0] if failed else "no build measured"
        reason = f"{screened}, not confirmed: {len(builds)} of {counted(total, 'fresh build')} measured ({why})"
        return dataclasses.replace(row, verdict=Verdict.INCONCLUSIVE, reason=reason, why=None)
    est = pooled([paired.time_ratio("head", "base") for paired in builds], confidence)
    tolerance = tolerance_for(bench.tolerance, est)
    verdict = verdict_for(est, tolerance)
    auto = isinstance(bench.tolerance, values.AutoTolerance)
    spread = f"spread between builds {est.spread:.1%}, {counted(est.count, 'fresh build')}"
    reason = reason_for(verdict, est, tolerance, noise=spread, remedy="raise --max-time or --confirm", auto=auto)
    reason += f"; judged at {confidence:.1%} on fresh builds ({screened})"
    if row.paired is not None and (difference := work_difference(row.paired.base_work, row.paired.head_work)[1]):
        reason += f"; {difference}"
    rounds = sum(len(paired.times["head"]) for paired in builds)
    baseline = median(t for paired in builds for t in paired.times["base"])
    again = dataclasses.replace(
        row,
        verdict=verdict,
        reason=reason,
        estimate=est,
        tolerance=tolerance,
        baseline=baseline,
        current=median(t for paired in builds for t in paired.times["head"]),
        base_runs=est.count,
        head_runs=est.count,
        base_total=total + 1,
        head_total=total + 1,
        base_rounds=rounds,
        head_rounds=rounds,
    )
    # The counts and the peak memory compared again over every build of each side (the first pass's too): one that
    # differs between a side's builds is varying, not a change (``measuring.compare_work``).
    first_pass = [] if row.paired is None else [row.paired.measured]
    sides = [*first_pass, *(paired.measurements for paired in builds)]
    base, head = ([m[side] for m in sides if side in m] for side in ("base", "head"))
    return with_work(again, base, head, baseline * est.value)
