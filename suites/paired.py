"""Paired measurement: several steps timed in interleaved rounds, so ratios between them survive a noisy machine.

A ratio of two medians measured one after the other is biased whenever the load on
the machine changes between them (other jobs, clocks, thermal state), and the two
confidence intervals say nothing about that. Here every round times each step once
(a block of the same number of calls), in alternating order, so both members of a
pair see the same conditions; a per-round ratio is then one observation, and the
distribution-free confidence interval of the median of those ratios is the
statistically sound basis for a relative assertion ("AMP is at least 1.1x faster",
"checkpointing costs at most one extra forward", "DDP efficiency is above 50%").

The sampler is the plugin's (warmup until steady, block sizing, time cap); the
stop rule waits until every ratio against the first step is known to the target.
In a distributed run every block goes through the Coordinator (barrier, slowest
rank counts, agreed stop), so all ranks run the same rounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_gpuperf.devices import Backend
from pytest_gpuperf.measurement import Check, Measurement
from pytest_gpuperf.runner import Coordinator, _gc_paused, _threads
from pytest_gpuperf.sampling import SamplingPlan, sample
from pytest_gpuperf.settings import Settings
from pytest_gpuperf.stats import median_ci
from pytest_gpuperf.workload import Step

__all__ = ["Estimate", "Paired", "PairedStopRule", "measure_paired"]


@dataclass(frozen=True)
class Estimate:
    """The median of a per-round quantity and its distribution-free confidence interval."""

    what: str
    median: float
    low: float
    high: float
    confidence: float
    rounds: int

    def __str__(self) -> str:
        return (
            f"{self.what} {self.median:.3g} ({self.confidence:.0%} CI [{self.low:.3g}, {self.high:.3g}] "
            f"from {self.rounds} paired rounds)"
        )

    @classmethod
    def of(cls, what: str, values: Sequence[float], confidence: float) -> Estimate:
        finite = [v for v in values if math.isfinite(v)]
        if not finite:
            raise ValueError(f"{what}: no finite per-round values to estimate from")
        ci = median_ci(finite, confidence)
        ordered = sorted(finite)
        n = len(ordered)
        median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
        return cls(what, median, ci.low, ci.high, ci.confidence, n)


@dataclass(frozen=True)
class Paired:
    """Per-call times of each step, round by round (index i of every list is the same round)."""

    times: Mapping[str, Sequence[float]]
    work: Mapping[str, Mapping[str, float]]
    confidence: float = 0.95
    measurements: Mapping[str, Measurement] = field(default_factory=dict)

    def per_round(self, what: str, fn: Callable[[Mapping[str, float]], float]) -> Estimate:
        """Estimate of ``fn({step: seconds per call})`` over the rounds."""
        names = list(self.times)
        rounds = len(self.times[names[0]])
        values = [fn({name: self.times[name][i] for name in names}) for i in range(rounds)]
        return Estimate.of(what, values, self.confidence)

    def speedup(self, fast: str, slow: str) -> Estimate:
        """How many times faster ``fast`` runs a call than ``slow`` (time of slow / time of fast)."""
        return self.per_round(f"speedup of {fast} over {slow}", lambda t: t[slow] / t[fast])

    def throughput_ratio(self, numerator: str, denominator: str, unit: str) -> Estimate:
        """Throughput of ``numerator`` over that of ``denominator``, in ``unit`` (both must do that work)."""
        work_n, work_d = self._work(numerator, unit), self._work(denominator, unit)
        return self.per_round(
            f"{unit}/s of {numerator} / {unit}/s of {denominator}",
            lambda t: (work_n / t[numerator]) / (work_d / t[denominator]),
        )

    def _work(self, name: str, unit: str) -> float:
        try:
            return self.work[name][unit]
        except KeyError:
            raise ValueError(f"step {name!r} does no {unit!r} work (has: {', '.join(self.work[name])})") from None


@dataclass
class PairedStopRule:
    """Stop when every step's time ratio against the first step is known to ``plan.target``, or at the cap."""

    plan: SamplingPlan
    times: Mapping[str, list[float]]

    def __call__(self, samples: Sequence[float], elapsed: float) -> tuple[bool, bool, str]:
        plan = self.plan
        n = len(samples)
        if n >= plan.min_samples and elapsed >= plan.min_time:
            widest = max(self._ratio_width(name, n) for name in list(self.times)[1:]) if len(self.times) > 1 else 0.0
            if widest <= plan.target:
                return True, True, f"every ratio's CI half-width <= target {plan.target:.2%} ({n} rounds)"
        if elapsed >= plan.max_time:
            return True, False, f"time cap {plan.max_time:g} s reached before the ratios reached {plan.target:.2%}"
        if n >= plan.max_samples:
            return True, False, f"sample cap {plan.max_samples} reached before the ratios reached {plan.target:.2%}"
        return False, False, ""

    def _ratio_width(self, name: str, n: int) -> float:
        first = next(iter(self.times))
        ratios = [a / b for a, b in zip(self.times[name][-n:], self.times[first][-n:], strict=True)]
        ci = median_ci(ratios, self.plan.confidence)
        if ci.confidence < self.plan.confidence:
            return math.inf
        return ci.relative_half_width(sorted(ratios)[n // 2])


def _round_runner(
    steps: Mapping[str, Step],
    time_block: Callable[[Callable[[], object], int], float],
    times: dict[str, list[float]],
) -> Callable[[int], float]:
    names = list(steps)
    rounds = [0]

    def run_round(iterations: int) -> float:
        # Alternate the order so neither step always runs right after the other (cache, clocks).
        order = names if rounds[0] % 2 == 0 else names[::-1]
        rounds[0] += 1
        total = 0.0
        for name in order:
            elapsed = time_block(steps[name].fn, iterations)
            times[name].append(elapsed / iterations)
            total += elapsed
        return total

    return run_round


def measure_paired(
    steps: Mapping[str, Step],
    backend: Backend,
    settings: Settings,
    *,
    device: str,
    coordinator: Coordinator | None = None,
    observers: Mapping[str, Callable[[Check], None]] | None = None,
    names: Mapping[str, str] | None = None,
) -> Paired:
    """Time ``steps`` in interleaved rounds of equal call counts; one Measurement per step, plus the rounds.

    ``names`` gives each step's Measurement name (default: its key); ``observers`` the
    Check observer of each (so assertions land in its record).
    """
    if not steps:
        raise ValueError("measure_paired needs at least one step")
    plan = settings.plan(backend.min_block_time)
    times: dict[str, list[float]] = {name: [] for name in steps}

    def time_block(fn: Callable[[], object], iterations: int) -> float:
        return backend.time_block(fn, iterations)

    def timed(fn: Callable[[], object], iterations: int) -> float:
        if coordinator is None:
            return time_block(fn, iterations)
        return coordinator.wrap_block(lambda k: time_block(fn, k))(iterations)

    run_round = _round_runner(steps, timed, times)
    rule = PairedStopRule(plan, times)
    agree = coordinator.agree if coordinator is not None else _same
    with _threads(settings.threads) as threads, _gc_paused():
        result = sample(run_round, plan, stop_rule=rule, agree=agree)
    n = len(result.samples)
    sampled = {name: times[name][-n:] for name in steps}
    memory = _peak_memory(steps, backend, settings)
    description = backend.describe()
    measurements: dict[str, Measurement] = {}
    for name, step in steps.items():
        observer = (observers or {}).get(name)
        peak, method = memory.get(name, (None, "off"))
        measurements[name] = Measurement(
            name=(names or {}).get(name, name),
            device=device,
            device_name=str(description.get("name", device)),
            samples=tuple(sampled[name]),
            iterations=result.iterations,
            warmup=result.warmup,
            converged=result.converged,
            stop_reason=f"paired rounds: {result.stop_reason}",
            sampling_seconds=result.seconds,
            target=plan.target,
            confidence=plan.confidence,
            work=dict(step.work),
            peak_memory=peak,
            memory_method=method,
            threads=threads,
            timer=backend.timer,
            inconclusive=settings.inconclusive,
            observer=observer,
        )
    work = {name: dict(step.work) for name, step in steps.items()}
    return Paired(sampled, work, plan.confidence, measurements)


def _same(flag: bool) -> bool:
    return flag


def _peak_memory(steps: Mapping[str, Step], backend: Backend, settings: Settings) -> dict[str, tuple[int | None, str]]:
    """One more call of each step under the backend's memory probe (as the single-step runner does)."""
    if not settings.memory:
        return {}
    out: dict[str, tuple[int | None, str]] = {}
    for name, step in steps.items():
        with _threads(settings.threads), backend.track_memory() as probe:
            step.fn()
            backend.synchronize()
        out[name] = (probe.peak_bytes, probe.method)
    return out
