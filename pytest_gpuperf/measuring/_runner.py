"""One measurement, end to end: backend + sampler + what is read beside the samples (``_reading.py``) -> Measurement.

This is the public entry point outside pytest too (asv benchmarks, scripts)::

    from pytest_gpuperf import measure
    m = measure(lambda: a @ a, device="cuda", flops=2 * n**3)
    print(m.throughput("FLOP"), m.ci)
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ._backends import Backend, block_timer
from ._calls import gc_paused, torch_threads
from ._devices import open_device
from ._judge import Check
from ._measurement import Measurement, NoDeviceWorkWarning
from ._reading import After, Around, open_sensors, read_after, sensed
from ._sampling import FixedBudget, SamplingResult, sample
from ._settings import MeasureSettings
from ._stats import counted_as, median
from ._units import format_duration

__all__ = [
    "BlockTimes",
    "Coordinator",
    "FixedCall",
    "Readings",
    "Subject",
    "measure",
    "measure_fixed",
    "measure_on",
    "measurement_of",
    "over_time_of",
    "work_from",
]


class Coordinator(Protocol):
    """Makes ranks of a distributed run agree (see ``_distributed.py``); absent in a single process."""

    def wrap_block(self, run_block: Callable[[int], float]) -> Callable[[int], float]: ...

    def agree(self, flag: bool) -> bool: ...


@dataclass(frozen=True)
class Subject:
    """What a Measurement is of, and who hears its checks: its name, the device it ran on, the work of one call by
    unit (for throughput), and the observer each of its Checks goes to (a record's list)."""

    name: str
    device: str
    work: Mapping[str, float] = field(default_factory=dict)
    observer: Callable[[Check], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Readings:
    """What was read beside the timed samples: torch's threads in effect, each reading's value by name
    (``_reading.py``), and per block the host's seconds per call (on an asynchronous device; the last ones match the
    kept samples), the device's seconds per call behind the lead and whether the lead was short (``BlockTimes``)."""

    threads: int
    values: Mapping[str, object] = field(default_factory=dict)
    host: Sequence[float | None] = ()
    device: Sequence[float | None] = ()
    short: Sequence[bool] = ()


@dataclass(frozen=True)
class FixedCall:
    """What each round of a fixed budget calls: ``target(*args, **kwargs)``, or ``target`` with the ``(args, kwargs)``
    that ``setup`` returns; ``teardown`` gets the round's arguments after it. ``setup`` and ``teardown`` run
    outside the time (pytest-benchmark's ``pedantic``)."""

    target: Callable[..., Any]
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] | None = None
    setup: Callable[[], Any] | None = None
    teardown: Callable[..., object] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))  # read once: an iterator would be empty by round two

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The next round's arguments: those given, or those ``setup`` returns (it runs here)."""
        args, kwargs = tuple(self.args), dict(self.kwargs or {})
        if self.setup is None:
            return args, kwargs
        made = self.setup()
        if not made:
            return args, kwargs
        if args or kwargs:
            raise TypeError("Can't use `args` or `kwargs` if `setup` returns the arguments.")
        new_args, new_kwargs = made
        return tuple(new_args), dict(new_kwargs)


def work_from(
    flops: float | None = None,
    bytes: float | None = None,  # noqa: A002 - the natural name for a user
    samples: float | None = None,
    items: float | None = None,
    work: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Collect the work done by one call, by unit; amounts must be positive numbers."""
    out: dict[str, float] = {}
    for unit, amount in (("FLOP", flops), ("B", bytes), ("samples", samples), ("items", items)):
        if amount is not None:
            out[unit] = amount
    for unit, amount in (work or {}).items():
        out[str(unit)] = amount
    for unit, amount in out.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not amount > 0:
            raise ValueError(f"work {unit}={amount!r} must be a positive number of {unit} done by one call")
        out[unit] = float(amount)
    return out


def measurement_of(
    result: SamplingResult,
    backend: Backend,
    settings: MeasureSettings,
    subject: Subject,
    readings: Readings,
    *,
    paired_samples: Sequence[float] | None = None,
) -> Measurement:
    """The Measurement of a sampling result, of ``subject``, with what was read beside it.

    ``paired_samples`` are one step's share of each paired round, kept as its samples instead of the result's
    (its stop reason says that they are paired rounds)."""
    description = backend.describe()
    kept = result.samples if paired_samples is None else tuple(paired_samples)
    stop_reason = result.stop_reason if paired_samples is None else f"paired rounds: {result.stop_reason}"
    # A sample is one call timed alone when its block held one call (a graph of one call in graph mode); paired
    # rounds keep a step's share of each round, which is no single call.
    single = paired_samples is None and result.iterations == 1 and (settings.mode != "graph" or settings.per_call)
    plan = settings.plan()  # the target and confidence sampled for: the settings', whatever the backend's block
    measurement = Measurement(
        name=subject.name,
        device=subject.device,
        device_name=str(description.get("name", subject.device)),
        samples=kept,
        iterations=result.iterations,
        warmup=result.warmup,
        converged=result.converged,
        stop_reason=stop_reason,
        sampling_seconds=result.seconds,
        target=plan.target,
        confidence=plan.confidence,
        work=dict(subject.work),
        threads=readings.threads,
        timer=backend.timer,
        inconclusive=settings.inconclusive,
        mode=settings.mode,
        host_per_call=_median_per_call(readings.host, len(kept)),
        single_calls=single,
        observer=subject.observer,
        device_per_call=_median_per_call(readings.device, len(kept)),
        short_leads=sum(readings.short[-len(kept) :]) if kept else 0,
        latency=single and settings.per_call,
        readings={name: value for name, value in readings.values.items() if value is not None},
    )
    if measurement.no_device_work:
        name, device = subject.name, subject.device
        warnings.warn(
            f"{name}: timed on {device} but ran no work on {device}: the device clock saw "
            f"{format_duration(measurement.device_per_call or 0)} per call for "
            f"{format_duration(measurement.host_per_call or 0)} "
            f"of host time; are the step's tensors and model on {device}?",
            NoDeviceWorkWarning,
            stacklevel=3,
        )
    return measurement


def _median_per_call(seconds: Sequence[float | None], kept: int) -> float | None:
    """Median seconds per call of the last ``kept`` blocks; None unless every one of them has one."""
    last = seconds[-kept:] if kept else []
    if len(last) < kept or not last or any(h is None for h in last):
        return None
    return median([h for h in last if h is not None])


class BlockTimes:
    """What the backend read beside each block timed through it: host and device seconds per call (None where the
    backend reports none) and whether its lead was short."""

    def __init__(self, backend: Backend, run_block: Callable[[int], float] | None = None) -> None:
        self.backend = backend
        self.run_block = run_block  # None: the blocks are timed elsewhere, and each is noted here (paired rounds)
        self.host: list[float | None] = []
        self.device: list[float | None] = []
        self.short: list[bool] = []

    def __call__(self, iterations: int) -> float:
        if self.run_block is None:
            raise TypeError("BlockTimes without a run_block only notes blocks timed elsewhere")
        seconds = self.run_block(iterations)
        self.note(iterations)
        return seconds

    def note(self, iterations: int) -> None:
        """Keep what the backend read of the block of ``iterations`` calls it just timed."""
        host, device = self.backend.last_host, self.backend.last_device
        self.host.append(None if host is None else host / iterations)
        self.device.append(None if device is None else device / iterations)
        self.short.append(self.backend.last_short)

    def last(self) -> float | None:
        return self.backend.last_host

    def tail(self) -> float | None:
        return self.backend.last_tail

    def readings(self, threads: int, values: Mapping[str, object]) -> Readings:
        return Readings(threads, values, self.host, self.device, self.short)


def measure_on(
    fn: Callable[[], object],
    backend: Backend,
    settings: MeasureSettings,
    *,
    name: str,
    device: str,
    work: Mapping[str, float],
    coordinator: Coordinator | None = None,
    observer: Callable[[Check], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Measure ``fn`` on ``backend`` under ``settings``; the shared path of the fixture, ``measure`` and asv."""
    plan = settings.plan(backend.min_block_time)
    with (
        torch_threads(settings.threads_for(device)) as threads,
        open_sensors(Around(backend, settings, clock)) as sensors,
    ):
        host = BlockTimes(backend, block_timer(backend, fn, settings.mode, per_call=settings.per_call))
        block = host if coordinator is None else coordinator.wrap_block(host)
        with gc_paused():
            result = sample(
                sensed(block, sensors.values()),
                plan,
                clock=clock,
                agree=coordinator.agree if coordinator else _same,
                host_time=host.last,
                tail=host.tail,
            )
    over_time = over_time_of(result, settings)
    if coordinator is not None and coordinator.agree(bool(over_time)) and not over_time:
        # Every rank reads memory and profile, or none does: the profiled call's collectives must meet.
        over_time = "another rank's calls did not fit max_time" + _left_out(settings)
    # The readings after timing call the step itself: in graph mode an eager call, not the graph's replay that the
    # samples timed. Each says so where it matters (the memory's method: the graph's private pool is not counted).
    after = After(fn, backend, settings, device, result, agree=None if coordinator is None else coordinator.agree)
    after.skip, after.over_time = ("over max_time", True) if over_time else ("", False)
    measurement = measurement_of(
        result,
        backend,
        settings,
        Subject(name, device, work, observer),
        host.readings(threads, read_after(after, sensors)),
    )
    return dataclasses.replace(measurement, over_time=over_time) if over_time else measurement


#: The most calls the reads after timing run: the CPU's memory probe (4, the work profile riding on them) and one.
READ_CALLS: Final = 5
#: The reads after timing run where ``READ_CALLS`` of the step's quickest calls fit in this many times ``max_time``;
#: the quickest, so that a busy machine does not drop a fast step's memory figure.
READS_SHARE: Final = 2.0


def _left_out(settings: MeasureSettings) -> str:
    """What a measurement over ``max_time`` reads after timing: its memory from one call, no work profile."""
    memory = "; memory read from one call" if settings.memory else ""
    return memory + ("; work profile not read" if settings.profile != "off" else "")


def over_time_of(result: SamplingResult, settings: MeasureSettings) -> str:
    """Why a measurement could not keep to ``max_time``, and what it left out; "" where it could.

    The warmup after the first call and the samples keep to ``max_time`` (``_sampling.py``); where one
    call was longer than that, the sampler took the fewest calls that give a figure (the first and one
    sample). The memory probe and the work profile run in full only where ``READ_CALLS`` calls fit in
    ``READS_SHARE`` times ``max_time``; elsewhere memory is read from one call and the work profile not at all.
    """
    if not result.samples:
        return ""
    quickest, call = min(result.samples), median(result.samples)
    reads = settings.memory or settings.profile != "off"
    longer = quickest >= settings.max_time
    if not longer and not (reads and READ_CALLS * quickest > READS_SHARE * settings.max_time):
        return ""
    left_out = _left_out(settings)
    if not longer:
        return (
            f"one call takes {format_duration(call)}: the memory probe and work profile ({READ_CALLS} calls) "
            f"would take over {READS_SHARE:g} x max_time {settings.max_time:g} s{left_out}"
        )
    first = result.warmup.block_times[0] if result.warmup.block_times else 0.0
    spent = result.seconds + max(result.warmup.seconds - first, 0.0)
    samples, warmup = counted_as(len(result.samples), "samples"), counted_as(result.warmup.calls, "calls")
    return (
        f"one call takes {format_duration(call)}, longer than max_time {settings.max_time:g} s: {samples} of "
        f"{counted_as(result.iterations, 'calls')} after {warmup} of warmup, {spent:.3g} s from the first call's "
        f"end{left_out}"
    )


def measure_fixed(
    call: FixedCall,
    backend: Backend,
    settings: MeasureSettings,
    budget: FixedBudget,
    subject: Subject,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[Measurement, Any]:
    """Measure a fixed budget, kept exactly (pytest-benchmark's ``pedantic``); (the Measurement, the last result).

    ``budget.warmup_rounds`` untimed rounds, then ``budget.rounds`` samples of
    ``budget.iterations`` calls each, in the one sampling loop with the budget's stop rule
    (``FixedStopRule``). ``call.setup`` runs before each round and ``call.teardown`` after it,
    both outside the time. No warmup until steady, no block sizing: the interval is the one
    the budget gives (none under 6 rounds), and the step is not run again for its peak
    memory. ValueError names a bad budget (pytest-benchmark's messages).
    """
    if budget.iterations > 1 and call.setup:
        raise ValueError("Can't use more than 1 `iterations` with a `setup` function.")
    results: list[Any] = []

    def one_round(iterations: int) -> float:
        args, kwargs = call.arguments()

        def step() -> object:
            out = call.target(*args, **kwargs)
            results[:] = [out]
            return out

        try:
            return block_timer(backend, step, settings.mode, per_call=settings.per_call)(iterations)
        finally:
            if call.teardown is not None:
                call.teardown(*args, **kwargs)

    plan = dataclasses.replace(settings.plan(backend.min_block_time), budget=budget)
    with torch_threads(settings.threads_for(subject.device)) as threads, gc_paused():
        result = sample(one_round, plan, clock=clock)
    # Running the step again for its memory would add calls to a budget the user fixed: nothing calls it after timing.
    after = After(
        call.target, backend, settings, subject.device, result, skip=f"{budget.caller} runs its own budget only"
    )
    readings = Readings(threads, read_after(after, {}))
    return measurement_of(result, backend, settings, subject, readings), results[0]


def _same(flag: bool) -> bool:
    return flag


def measure(
    fn: Callable[[], object],
    *,
    device: str = "cpu",
    name: str | None = None,
    settings: MeasureSettings | None = None,
    flops: float | None = None,
    bytes: float | None = None,  # noqa: A002
    samples: float | None = None,
    items: float | None = None,
    work: Mapping[str, float] | None = None,
    **overrides: Any,
) -> Measurement:
    """Measure ``fn`` on one device outside pytest; ``overrides`` are settings such as ``target=0.02``."""
    base = settings or MeasureSettings()
    if overrides:
        base = base.with_values(overrides, context="measure()")
    slot, backend = open_device(device)
    return measure_on(
        fn,
        backend,
        base,
        name=name or str(getattr(fn, "__name__", "measure")),
        device=slot.id,
        work=work_from(flops, bytes, samples, items, work),
    )
