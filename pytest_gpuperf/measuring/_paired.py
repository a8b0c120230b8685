"""Paired measurement: several steps timed in interleaved rounds, so ratios between them survive a noisy machine.

A ratio of two medians measured one after the other is biased whenever the load on
the machine changes between them (other jobs, clocks, thermal state), and the two
confidence intervals say nothing about that. Here every round times each step once
(a block of the same number of calls), in an order drawn at random, so both members of a
pair see the same conditions; a per-round ratio is then one observation, and the
distribution-free confidence interval of the median of those ratios is the
statistically sound basis for a relative assertion ("AMP is at least 1.1x faster",
"checkpointing costs at most one extra forward", "DDP efficiency is above 50%") or
for a gate ("head is no slower than base", ``gate/_ab.py``).

Memory layout is the other bias. Two identical steps with buffers of their own, timed in
one process, can differ consistently by several percent (where their tensors landed:
cache sets, pages), and that difference stays for the life of the buffers. A step given
as a *factory* (a callable returning a Step) is therefore built afresh before every
round: the previous round's build stays alive while the new one is allocated, so the new
tensors land at other addresses, and each new build is called ``warm_calls`` times
untimed (first-call page faults, optimizer state). That alone is not enough: the
allocator hands the freed memory of one round to the next, so the builds cycle through
the same few places for the whole process, and a process-long bias remains. So before
every build a spacer of random size (0 to 8 MiB, on the step's device, untouched) is
allocated and kept for the round, and each build lands at an offset of its own. Python's
garbage collector runs while building, never while timing. What this buys is measured end
to end by ``bench/gate_power.py`` (``bench/evidence/gate-power.md``).

Each build is a new callable, so every block of a step is timed inside ``Backend.same_step``: what the backend
learnt of the step's launch (on CUDA its lead: the host's time, whether it synchronizes) carries over from one
build to the next. Memory is each step's own: after the rounds the builds and spacers are released, and each
factory is built once more and read alone (``measure_paired``).

Order is drawn at random, never fixed. Rounds go in pairs: the first round of a pair times
the steps in a random order, the second in the reverse one, so each step is timed first
equally often; builds go in a random order every round. A fixed schedule (build order
flipped every round, timing order every second round, as before) repeats every four rounds,
and a load with that period (another process's periodic work, a timer tick that wakes a
sleeper late) falls on the same step in every round: ``ab`` once read an unchanged 2 ms
sleeper as 2.750 [2.714, 2.764], slower, at load 4 to 6. Drawn at random, the load falls
on either step equally often, whatever its period; the sign of each round's deviation is
then a fair coin, which is what the distribution-free interval of the median assumes. A load
in bursts longer than a round still makes consecutive rounds deviate alike: the interval is
widened for what the rounds' order shows of that (``serial_median_ci``). In
a distributed run the orders come from a seed all ranks share, so that every rank times
the same step in the same block.

The sampler is the plugin's (warmup until steady, block sizing, time cap); the
stop rule waits until every ratio against the first step is known to the target.
In a distributed run every block goes through the Coordinator (barrier, slowest
rank counts, agreed stop), so all ranks run the same rounds.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from ._backends import CUDA_PEAK, Backend, block_timer
from ._calls import gc_paused, torch_threads
from ._judge import Check
from ._measurement import Measurement
from ._memory import MEMORY, MemoryReading
from ._reading import After, Around, open_sensors, read_after, sensed
from ._runner import BlockTimes, Coordinator, Subject, measurement_of
from ._sampling import SamplingPlan, block_size, caps_reached, sample
from ._settings import MeasureSettings
from ._stats import Estimate, estimate_median, median, serial_median_ci
from ._workload import Step

__all__ = ["Paired", "PairedStopRule", "StepFactory", "measure_paired"]

#: Builds a step afresh (new tensors, new model); given instead of a Step, the step is rebuilt every round.
StepFactory: TypeAlias = Callable[[], Step]
#: Untimed calls of each fresh build before its round is timed.
WARM_CALLS: Final = 1
#: Spacers allocated before each build are of a uniformly random size below this many bytes.
SPACER_BYTES: Final = 8 << 20
#: The seed of the orders (and spacer sizes) of a distributed run, the same on every rank.
SHARED_SEED: Final = 23


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
        return estimate_median(what, values, self.confidence)

    def speedup(self, fast: str, slow: str) -> Estimate:
        """How many times faster ``fast`` runs a call than ``slow`` (time of slow / time of fast)."""
        return self.per_round(f"speedup of {fast} over {slow}", lambda t: t[slow] / t[fast])

    def time_ratio(self, numerator: str, denominator: str) -> Estimate:
        """Time per call of ``numerator`` over that of ``denominator`` (above 1: ``numerator`` is slower)."""
        return self.per_round(f"time of {numerator} / time of {denominator}", lambda t: t[numerator] / t[denominator])

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
    """Stop when every step's time ratio against the first step is known to ``plan.target`` (a single step: its
    own median), or at the cap."""

    plan: SamplingPlan
    times: Mapping[str, list[float]]

    def __call__(self, samples: Sequence[float], elapsed: float) -> tuple[bool, bool, str]:
        plan = self.plan
        n = len(samples)
        if n >= plan.min_samples and elapsed >= plan.min_time:
            names = list(self.times)
            first = self.times[names[0]][-n:]
            series = [[a / b for a, b in zip(self.times[name][-n:], first, strict=True)] for name in names[1:]]
            widest = max(self._width(values) for values in series or [first])
            if widest <= plan.target:
                what = "every ratio's" if series else "the median's"
                return True, True, f"{what} CI half-width <= target {plan.target:.2%} ({n} rounds)"
        return caps_reached(plan, n, elapsed, f"the ratios reached {plan.target:.2%}")

    def _width(self, values: Sequence[float]) -> float:
        ci, _ = serial_median_ci(values, self.plan.confidence)  # the interval the ratio will be given
        if ci.confidence < self.plan.confidence:
            return math.inf
        return ci.relative_half_width(median(values))


@contextmanager
def _gc_running() -> Iterator[None]:
    """Let the collector run inside the block (a build's garbage is collected there, not while timing)."""
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was_enabled:
            gc.disable()


@dataclass
class RoundSteps:
    """The steps of each round: Steps as given, factories called afresh before every round.

    The current builds stay referenced while the next ones are built (so those get
    other memory) and are released right after; each build is preceded by a spacer of
    random size, kept for the round, so that it lands at an offset of its own.
    """

    sources: Mapping[str, Step | StepFactory]
    warm_calls: int = WARM_CALLS
    #: Allocates an untouched buffer of the given bytes on the steps' device (None: no spacers).
    spacer: Callable[[int], object] | None = None
    rng: random.Random = field(default_factory=random.Random)
    current: dict[str, Step] = field(default_factory=dict)
    spacers: list[object] = field(default_factory=list)
    factories: dict[str, StepFactory] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, source in self.sources.items():
            if isinstance(source, Step):
                self.current[name] = source
            else:
                self.factories[name] = source

    def for_round(self, index: int) -> Mapping[str, Step]:
        if self.factories:
            order = list(self.factories)
            self.rng.shuffle(order)  # a fixed build order could line up with a periodic load (module docstring)
            with _gc_running():
                spacers, fresh = [], {}
                for name in order:
                    if self.spacer is not None:
                        spacers.append(self.spacer(self.rng.randrange(SPACER_BYTES)))
                    fresh[name] = self._build(name)
                # The previous builds and spacers are released here, after the new ones exist.
                self.current.update(fresh)
                self.spacers = spacers
                for name in order:
                    for _ in range(self.warm_calls):
                        fresh[name].fn()
        return self.current

    def _build(self, name: str) -> Step:
        step = self.factories[name]()
        if not isinstance(step, Step):
            raise TypeError(f"the factory of step {name!r} returned {type(step).__name__}, not a Step")
        return step

    def release(self) -> None:
        """Release the builds and spacers made for the rounds (the Steps given as objects are their caller's)."""
        for name in self.factories:
            self.current.pop(name, None)
        self.spacers = []

    @contextmanager
    def alone(self, name: str) -> Iterator[Step]:
        """The step ``name`` with no build of another step alive, nor a spacer (after ``release``): a factory built
        afresh and called ``warm_calls`` times, released on leaving; a Step as given."""
        if name not in self.factories:
            yield self.current[name]
            return
        with _gc_running():
            step = self._build(name)
            for _ in range(self.warm_calls):
                step.fn()
        try:
            yield step
        finally:
            del step


@dataclass
class RoundRunner:
    """Runs one round: each step timed once, in a block sized for that step; the first round of each pair in an
    order drawn at random, the second in its reverse (module docstring).

    The sampler sizes its ``iterations`` from the whole round, so the slowest step sets
    it; a fast step timed beside a slow one gets a larger block of its own (its warm-up
    minimum per call, with the host's launch time where that is longer), so that no step
    is timed a call or two at a time. A step's block only grows, and only when it must
    grow more than twofold, so the sizes settle during warmup.
    """

    rounds: RoundSteps
    block: Callable[[Step, int], float]
    plan: SamplingPlan
    backend: Backend
    times: dict[str, list[float]]
    #: what the backend read beside each step's blocks (host and device seconds, short leads)
    read: dict[str, BlockTimes] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    cheapest: dict[str, float] = field(default_factory=dict)
    count: int = 0
    #: the timing order of the last round
    order: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in self.rounds.sources:
            self.read.setdefault(name, BlockTimes(self.backend))

    def __call__(self, iterations: int) -> float:
        index = self.count
        self.count += 1
        steps = self.rounds.for_round(index)
        total = 0.0
        for name in self._order(index):
            calls = max(iterations, self.sizes.get(name, 1))
            read = self.read[name]
            # Each round's build of a step is a new callable: the backend is told that it is the same step (its
            # launch lead carries over, on CUDA), which ``read`` stands for.
            with self.backend.same_step(read):
                elapsed = self.block(steps[name], calls)
            read.note(calls)
            host = read.last()
            self.times[name].append(elapsed / calls)
            self._resize(name, max(elapsed, host or 0.0) / calls, index)
            total += elapsed / calls * iterations
        return total

    def _order(self, index: int) -> list[str]:
        """A random order for the first round of a pair, its reverse for the second: each step is timed first
        equally often, and no load that depends on the position in the sequence can follow one step."""
        if index % 2 == 0 or len(self.order) != len(self.rounds.sources):
            self.order = list(self.rounds.sources)
            self.rounds.rng.shuffle(self.order)
            return self.order
        self.order.reverse()
        return self.order

    def _resize(self, name: str, cost: float, index: int) -> None:
        if index == 0 or cost <= 0:
            return  # the first round pays for first calls: it sizes nothing
        self.cheapest[name] = min(self.cheapest.get(name, math.inf), cost)
        wanted = block_size(self.cheapest[name], self.plan)
        if wanted > 2 * self.sizes.get(name, 1):
            self.sizes[name] = wanted


def measure_paired(
    steps: Mapping[str, Step | StepFactory],
    backend: Backend,
    settings: MeasureSettings,
    *,
    device: str,
    coordinator: Coordinator | None = None,
    observers: Mapping[str, Callable[[Check], None]] | None = None,
    names: Mapping[str, str] | None = None,
    warm_calls: int = WARM_CALLS,
) -> Paired:
    """Time ``steps`` in interleaved rounds of equal call counts; one Measurement per step, plus the rounds.

    A step given as a factory (``lambda: workload.build(device, size)``) is built afresh
    before every round (module docstring). Each step's memory and work profile are read after
    the rounds with no build of another step nor a spacer alive: a factory's on a build of its
    own, called ``warm_calls`` times first; a Step given as an object stays alive (its caller
    holds it), so its memory is in the other steps' figures, whose method says so.
    ``names`` gives each step's Measurement name (default: its key); ``observers`` the Check
    observer of each (so assertions land in its record).
    """
    if not steps:
        raise ValueError("measure_paired needs at least one step")
    plan = settings.plan(backend.min_block_time)
    times: dict[str, list[float]] = {name: [] for name in steps}
    # Every rank of a distributed run must time the same step in the same block: there, the order is drawn from a
    # seed all ranks share (a pseudo-random sequence, which no load's period follows either).
    rng = random.Random() if coordinator is None else random.Random(SHARED_SEED)
    rounds = RoundSteps(steps, warm_calls, spacer=_spacer(device), rng=rng)
    timers: dict[int, tuple[Step, Callable[[int], float]]] = {}

    def timed(step: Step, iterations: int) -> float:
        # One timer per build of a step (graph mode captures each build once), kept only while the build is
        # current: a previous build must be released with its round.
        if id(step) not in timers:
            current = {id(s) for s in rounds.current.values()}
            for key in [k for k in timers if k not in current]:
                del timers[key]
            timers[id(step)] = (step, block_timer(backend, step.fn, settings.mode))
        timer = timers[id(step)][1]
        if coordinator is None:
            return timer(iterations)
        return coordinator.wrap_block(timer)(iterations)

    rule = PairedStopRule(plan, times)
    agree = coordinator.agree if coordinator is not None else _same
    runner = RoundRunner(rounds, timed, plan, backend, times)
    around = Around(backend, settings, paired=True)
    with torch_threads(settings.threads_for(device)) as threads, gc_paused(), open_sensors(around) as sensors:
        # Each sensor is told once per round (``Around.paired``): what it reads is shared by the round's steps.
        result = sample(sensed(runner, sensors.values()), plan, stop_rule=rule, agree=agree)
    n = len(result.samples)
    sampled = {name: times[name][-n:] for name in steps}
    measurements: dict[str, Measurement] = {}
    work: dict[str, dict[str, float]] = {}
    # Each step's memory (and work profile) is its own: read with no other step's build nor a spacer alive, a
    # factory's on a build of its own. Without those reads nothing calls the step: its last build serves.
    called = settings.memory or settings.profile != "off"
    lasts = {} if called else dict(rounds.current)
    timers.clear()
    rounds.release()
    for name in steps:
        with rounds.alone(name) if called else nullcontext(lasts[name]) as step:
            ranks = None if coordinator is None else coordinator.agree
            after = After(step.fn, backend, settings, device, result, len(steps), agree=ranks)
            values = read_after(after, sensors)
            values[MEMORY.name] = _with_others(values.get(MEMORY.name), [o for o in rounds.current if o != name])
            measurements[name] = measurement_of(
                result,
                backend,
                settings,
                Subject((names or {}).get(name, name), device, step.work, (observers or {}).get(name)),
                runner.read[name].readings(threads, values),
                paired_samples=sampled[name],
            )
            work[name] = dict(step.work)
            del after, step  # released before the next step is built and read
    return Paired(sampled, work, plan.confidence, measurements)


def _with_others(memory: object, others: Sequence[str]) -> object:
    """A CUDA peak read with the Step objects ``others`` resident (their caller keeps them alive), saying so."""
    if not others or not isinstance(memory, MemoryReading) or not memory.method.startswith(CUDA_PEAK):
        return memory
    whose = f"Step object of {others[0]}" if len(others) == 1 else f"Step objects of {', '.join(others)}"
    return dataclasses.replace(memory, method=f"{memory.method}, with the {whose} resident (kept alive by the caller)")


def _spacer(device: str) -> Callable[[int], object]:
    import torch

    def allocate(nbytes: int) -> object:
        return torch.empty(nbytes, dtype=torch.uint8, device=device)

    return allocate


def _same(flag: bool) -> bool:
    return flag
