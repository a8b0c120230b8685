"""Adaptive sampling: warm up until steady, size blocks, sample until the median is known well enough.

Pure logic. The device part comes in as ``run_block(iterations) -> seconds`` and the
wall clock as ``clock() -> seconds``, so a fake clock drives every path in tests.

1. Warmup. Blocks are run and timed; the block size grows as the per-iteration
   time estimate falls (first calls pay for lazy init, autotuning, compilation).
   The first call is timed but neither counts against ``warmup_time`` nor sizes a
   block: a multi-second first call (lazy CUDA init, cuDNN autotune, torch.compile)
   says nothing about the steady call. Warmup ends when ``steady_blocks`` blocks in
   a row fail to set a new minimum by more than ``steady_tolerance``, or at
   ``warmup_time`` (then it says so).
2. Block size. Iterations per sample are chosen so one sample lasts at least the
   backend's ``min_block_time``: far above timer resolution and per-call overhead.
   Blocks are re-sized from steady calls: once the first ``RESIZE_AFTER`` samples
   are in, if their median says a block is less than half ``min_block_time`` long,
   the block is enlarged and sampling starts over (the short blocks count as warmup).
   ``per_call`` forces blocks of one call (``--gpuperf-per-call``): each sample is then
   one call timed alone, so percentiles of the samples are percentiles of calls, paid
   for with a timer read (on CUDA an event pair and a synchronization) per call.
3. Sampling. A stop rule sees the samples and the elapsed time after each block:
   by default it stops when the distribution-free 95% CI of the median is within
   ``target`` (relative half-width), after ``min_samples`` and ``min_time``, or at
   ``max_time`` (then the result says the target was not reached).

The time caps count from the end of the first call (which nothing can shorten): the
warmup after it and the samples share ``max_time``, the warmup at most
``WARMUP_SHARE`` of it. A first call longer than ``max_time`` ends the warmup at once,
and a warmup block that would pass its cap is not started, so a step that cannot fit
gets the fewest calls that still give a figure: the first call and one sample. Each
phase overruns its cap by at most the block in flight (a block is at most
``max_block_fraction`` of ``max_time``, or one call where one call is longer).

A plan may instead carry a ``FixedBudget`` (pytest-benchmark's ``pedantic``): the loop then
keeps it exactly, with ``warmup_rounds`` blocks untimed as samples (no warmup until
steady), ``rounds`` samples after them, every block of the budget's ``iterations`` calls (no
sizing, no re-sizing), and stops by ``FixedStopRule``: at the last round, neither sooner nor
at a cap.

In a distributed run every decision goes through ``agree`` so that all ranks take
the same branch (see ``_distributed.py``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeVar

from ._stats import median, median_ci, min_samples_for
from ._values import MAX_SAMPLES

__all__ = [
    "CiStopRule",
    "FixedBudget",
    "FixedStopRule",
    "SamplingPlan",
    "SamplingResult",
    "StopRule",
    "Warmup",
    "block_size",
    "caps_reached",
    "sample",
    "stop_rule_for",
]

_T = TypeVar("_T")

#: Samples taken before the block size is checked against their median (and re-sized if far too short).
RESIZE_AFTER: Final = 5
#: Re-sizes allowed after warmup; each restarts sampling.
MAX_RESIZES: Final = 3
#: A block's tail (``sample``'s ``tail``: work its last call leaves that more calls would share) is at most this
#: share of the block's time: a host-bound CUDA step's sampling then costs at most about 1.1 times its figure.
TAIL_SHARE: Final = 0.1
#: The most of ``max_time`` the warmup after the first call may take, so that samples get the rest.
WARMUP_SHARE: Final = 0.5


@dataclass(frozen=True)
class FixedBudget:
    """A budget the caller fixed, kept exactly (pytest-benchmark's ``pedantic``): ``warmup_rounds`` blocks first,
    not kept as samples, then ``rounds`` samples, every block of ``iterations`` calls.

    ``caller`` names it in the stop reason (``benchmark.pedantic's fixed budget: ...``).
    ValueError, with pytest-benchmark's messages, for a count that is not a positive int.
    """

    rounds: int
    iterations: int = 1
    warmup_rounds: int = 0
    caller: str = "measure_fixed"

    def __post_init__(self) -> None:
        if not _count(self.iterations, least=1):
            raise ValueError("Must have positive int for `iterations`.")
        if not _count(self.rounds, least=1):
            raise ValueError("Must have positive int for `rounds`.")
        if not _count(self.warmup_rounds, least=0):
            raise ValueError("Must have positive int for `warmup_rounds`.")

    def __str__(self) -> str:
        return f"{self.caller}'s fixed budget: {self.rounds} rounds x {self.iterations} iterations"


def _count(value: object, *, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


@dataclass(frozen=True)
class SamplingPlan:
    """How long and how precisely to measure. Validated by settings; defaults are documented there."""

    target: float = 0.01
    confidence: float = 0.95
    min_samples: int = 10
    min_time: float = 0.1
    max_time: float = 5.0
    warmup_time: float = 1.0
    min_block_time: float = 1e-3
    steady_blocks: int = 3
    steady_tolerance: float = 0.02
    max_samples: int = MAX_SAMPLES
    #: A block never grows past this fraction of max_time, so slow steps still give samples.
    max_block_fraction: float = 0.05
    #: Every block is one call (``--gpuperf-per-call``): samples are single calls, not means of blocks.
    per_call: bool = False
    #: A budget kept exactly instead of the adaptive warmup, block size and stop rule above (None: adaptive).
    budget: FixedBudget | None = None


@dataclass(frozen=True)
class Warmup:
    blocks: int
    calls: int
    seconds: float
    steady: bool
    #: per-iteration time of each warmup block, in order
    block_times: tuple[float, ...]
    #: times sampling started over with larger blocks because steady calls proved the blocks too short
    resizes: int = 0


@dataclass(frozen=True)
class SamplingResult:
    #: seconds per iteration, one value per sample (block time / iterations)
    samples: tuple[float, ...]
    iterations: int
    warmup: Warmup
    converged: bool
    stop_reason: str
    seconds: float


class StopRule(Protocol):
    """Decides after each sample whether to stop; returns (stop, converged, reason)."""

    def __call__(self, samples: Sequence[float], elapsed: float) -> tuple[bool, bool, str]: ...


@dataclass
class CiStopRule:
    """Stop when the median's CI half-width is within ``target``; give up at ``max_time``."""

    plan: SamplingPlan
    _next_check: int = field(default=0, init=False)

    def __call__(self, samples: Sequence[float], elapsed: float) -> tuple[bool, bool, str]:
        plan = self.plan
        n = len(samples)
        enough = n >= plan.min_samples and elapsed >= plan.min_time
        # The CI costs a sort; checking at geometric steps keeps the loop cheap for many samples.
        if enough and n >= self._next_check:
            self._next_check = max(n + 1, int(n * 1.05))
            ci = median_ci(samples, plan.confidence)
            width = ci.relative_half_width(median(samples))
            if ci.confidence >= plan.confidence and width <= plan.target:
                return True, True, f"CI half-width {width:.2%} <= target {plan.target:.2%}"
        return caps_reached(plan, n, elapsed, f"the {plan.target:.2%} target")


@dataclass
class FixedStopRule:
    """Stop at the budget's last round, neither sooner nor at a cap; converged when the rounds' interval of the
    median reached the target (none does from fewer rounds than ``min_samples_for``: 6 at 95%)."""

    plan: SamplingPlan
    budget: FixedBudget

    def __call__(self, samples: Sequence[float], elapsed: float) -> tuple[bool, bool, str]:
        if len(samples) < self.budget.rounds:
            return False, False, ""
        plan, budget = self.plan, self.budget
        ci = median_ci(samples, plan.confidence)
        if ci.falls_short(plan.confidence):
            needs = min_samples_for(plan.confidence)
            return True, False, f"{budget}; a {plan.confidence:.0%} interval needs {needs} rounds"
        width = ci.relative_half_width(median(samples))
        if width > plan.target:
            return True, False, f"{budget}; CI half-width {width:.2%} > target {plan.target:.2%}"
        return True, True, f"{budget}; CI half-width {width:.2%} <= target {plan.target:.2%}"


def stop_rule_for(plan: SamplingPlan) -> StopRule:
    """The plan's own stop rule: its fixed budget's, or the median's CI reaching the target."""
    return CiStopRule(plan) if plan.budget is None else FixedStopRule(plan, plan.budget)


def caps_reached(plan: SamplingPlan, n: int, elapsed: float, goal: str) -> tuple[bool, bool, str]:
    """The caps every stop rule shares: stop unconverged once time or samples run out before ``goal``."""
    if elapsed >= plan.max_time:
        return True, False, f"time cap {plan.max_time:g} s reached before {goal}"
    if n >= plan.max_samples:
        return True, False, f"sample cap {plan.max_samples} reached before {goal}"
    return False, False, ""


def block_size(per_iteration: float, plan: SamplingPlan) -> int:
    """Iterations per sample so a sample lasts at least ``min_block_time``, but not a large part of the budget
    (always 1 under ``per_call``)."""
    if plan.per_call or per_iteration <= 0 or not math.isfinite(per_iteration):
        return 1
    return _within(math.ceil(plan.min_block_time / per_iteration), per_iteration, plan)


def _within(wanted: int, per_iteration: float, plan: SamplingPlan) -> int:
    """``wanted`` iterations, at least 1 and within a block's ceiling: ``max_block_fraction`` of ``max_time``."""
    return max(1, min(wanted, math.floor(plan.max_time * plan.max_block_fraction / per_iteration)))


def _itself(value: _T) -> _T:
    """A process alone agrees with itself (``agree``), and a block's time is its cost (``_cost_of``)."""
    return value


def sample(
    run_block: Callable[[int], float],
    plan: SamplingPlan,
    *,
    clock: Callable[[], float] = time.perf_counter,
    stop_rule: StopRule | None = None,
    agree: Callable[[bool], bool] = _itself,
    host_time: Callable[[], float | None] | None = None,
    tail: Callable[[], float | None] | None = None,
) -> SamplingResult:
    """Warm up, then sample ``run_block`` until ``stop_rule`` (default: the plan's) says stop. See the module
    docstring.

    ``host_time`` gives the host seconds of the last block where they differ from its
    device time (an asynchronous device): blocks are then sized by the longer of the two,
    so a step whose device time is tiny next to its launch time is not run in huge blocks.
    ``tail`` gives the seconds the last block waited, after its last call, for work that more calls per block
    would share (a host-bound step's device tail): the warmup sizes blocks so that it is at most ``TAIL_SHARE`` of
    a block's time.
    """
    cost = _cost_of(host_time)
    budget = plan.budget
    if budget is None:
        warmup, iterations, origin = _warm_up(run_block, plan, clock, agree, cost, tail)
    else:
        warmup, iterations = _fixed_warm_up(run_block, budget, clock)
        origin = None
    rule = stop_rule if stop_rule is not None else stop_rule_for(plan)
    samples: list[float] = []
    costs: list[float] = []
    resizes = 0
    start = clock()
    # The rule's time counts from the first call's end: the warmup after it spends max_time too.
    counted_from = start if origin is None else origin
    while True:
        elapsed_block = run_block(iterations)
        samples.append(elapsed_block / iterations)
        costs.append(cost(elapsed_block) / iterations)
        if budget is None and len(samples) == RESIZE_AFTER and resizes < MAX_RESIZES:
            # Every rank sees the same block times (the coordinator returns the slowest), so all re-size alike.
            resized = _steady_size(costs, iterations, plan, tail)
            if resized is not None:
                warmup = _with_blocks(warmup, samples, iterations, clock() - start)
                iterations, samples, costs, resizes = resized, [], [], resizes + 1
                start = clock()
                continue
        stop, converged, reason = rule(samples, clock() - counted_from)
        if agree(stop):
            if not stop:
                converged, reason = False, "stopped with the other ranks"
            break
    if resizes:
        warmup = dataclasses.replace(warmup, resizes=resizes)
    return SamplingResult(tuple(samples), iterations, warmup, converged, reason, clock() - start)


def _cost_of(host_time: Callable[[], float | None] | None) -> Callable[[float], float]:
    """What sizes a block: its time, or its host time where that is longer."""
    if host_time is None:
        return _itself

    def cost(elapsed: float) -> float:
        host = host_time()
        return elapsed if host is None else max(elapsed, host)

    return cost


def _sharing(tail: Callable[[], float | None] | None, per_iteration: float, plan: SamplingPlan) -> int:
    """Iterations per block for the last block's tail (``sample``) to be at most ``TAIL_SHARE`` of its time,
    within the block's ceiling (``block_size``); 1 without a tail, and under ``per_call``."""
    seconds = None if tail is None else tail()
    if not seconds or plan.per_call or per_iteration <= 0 or not math.isfinite(per_iteration):
        return 1
    return _within(math.ceil(seconds / (TAIL_SHARE * per_iteration)), per_iteration, plan)


def _steady_size(
    costs: Sequence[float], iterations: int, plan: SamplingPlan, tail: Callable[[], float | None] | None
) -> int | None:
    """A larger block size when the steady samples show the block far shorter than ``min_block_time``, or its
    tail far above ``TAIL_SHARE`` of it, else None."""
    per_iteration = median(costs)
    grown, shared = block_size(per_iteration, plan), _sharing(tail, per_iteration, plan)
    return max(grown, shared) if grown > 2 * iterations or shared > iterations else None


def _with_blocks(warmup: Warmup, samples: Sequence[float], iterations: int, seconds: float) -> Warmup:
    """``warmup`` extended by sampling blocks that turned out to be warmup (too short to keep)."""
    return dataclasses.replace(
        warmup,
        blocks=warmup.blocks + len(samples),
        calls=warmup.calls + len(samples) * iterations,
        seconds=warmup.seconds + seconds,
        block_times=warmup.block_times + tuple(samples),
    )


def _fixed_warm_up(
    run_block: Callable[[int], float], budget: FixedBudget, clock: Callable[[], float]
) -> tuple[Warmup, int]:
    """The budget's warmup rounds, each a block of its iterations; steady means that there were some."""
    began = clock()
    times = tuple(run_block(budget.iterations) / budget.iterations for _ in range(budget.warmup_rounds))
    warmup = Warmup(budget.warmup_rounds, budget.warmup_rounds * budget.iterations, clock() - began, bool(times), times)
    return warmup, budget.iterations


def _warm_up(
    run_block: Callable[[int], float],
    plan: SamplingPlan,
    clock: Callable[[], float],
    agree: Callable[[bool], bool],
    cost: Callable[[float], float],
    tail: Callable[[], float | None] | None = None,
) -> tuple[Warmup, int, float]:
    """The warmup, the block size it chose, and the clock at the first call's end (where the time caps start)."""
    began = start = clock()
    limit = min(plan.warmup_time, plan.max_time * WARMUP_SHARE)
    iterations = 1
    calls = 0
    best = cheapest = math.inf
    quiet = 0  # blocks in a row without a new minimum
    history: list[float] = []
    while True:
        elapsed = run_block(iterations)
        calls += iterations
        per_iteration = elapsed / iterations
        history.append(per_iteration)
        if len(history) == 1:
            # The first call pays for lazy init, autotuning and compilation: it neither sizes a block nor spends
            # the warmup budget, which starts after it.
            start = clock()
        else:
            if per_iteration < best * (1.0 - plan.steady_tolerance):
                quiet = 0
            else:
                quiet += 1
            best = min(best, per_iteration)
            cheapest = min(cheapest, cost(elapsed) / iterations)
        # A timer that reads zero cannot size a block: grow it, within reason, until it reads something.
        if math.isinf(cheapest):
            resized = 1
        elif cheapest > 0 or plan.per_call:
            resized = max(block_size(cheapest, plan), _sharing(tail, cheapest, plan) if len(history) > 1 else 1)
        else:
            resized = min(iterations * 10, 1_000_000)
        if resized > 2 * iterations:
            quiet = 0  # a much larger block is a new regime: check steadiness again at that size
        iterations = max(iterations, resized)
        steady = quiet >= plan.steady_blocks
        spent = clock() - start
        if len(history) == 1:
            # One call longer than the whole time cap: more warmup calls cannot fit; go straight to one sample.
            out_of_time = per_iteration >= plan.max_time
        else:
            # Do not start a block that would end past the cap (its time estimated from this one's).
            out_of_time = spent >= limit or spent + per_iteration * iterations > limit
        if agree(steady or out_of_time):
            break
    return Warmup(len(history), calls, clock() - began, steady, tuple(history)), iterations, start
