"""One measurement, end to end: backend + sampler + peak memory -> Measurement.

This is the public entry point outside pytest too (asv benchmarks, scripts)::

    from pytest_gpuperf import measure
    m = measure(lambda: a @ a, device="cuda", flops=2 * n**3)
    print(m.throughput("FLOP"), m.ci)
"""

from __future__ import annotations

import gc
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from ._backends import Backend, block_timer
from ._clocks import ClockSummary, clock_monitor, monitored
from ._devices import open_device
from ._judge import Check
from ._measurement import Measurement, NoDeviceWorkWarning
from ._sampling import SamplingPlan, SamplingResult, Warmup, sample
from ._settings import MeasureSettings
from ._stats import median, min_samples_for, summarize
from ._units import format_duration

__all__ = [
    "Coordinator",
    "HostTimes",
    "gc_paused",
    "measure",
    "measure_fixed",
    "measure_on",
    "measurement_of",
    "peak_memory",
    "torch_threads",
    "work_from",
]


class Coordinator(Protocol):
    """Makes ranks of a distributed run agree (see ``_distributed.py``); absent in a single process."""

    def wrap_block(self, run_block: Callable[[int], float]) -> Callable[[int], float]: ...

    def agree(self, flag: bool) -> bool: ...


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


@contextmanager
def torch_threads(count: int | None) -> Iterator[int]:
    """torch's intra-op threads set to ``count`` (None: leave them) inside the block; yields the count in effect."""
    import torch

    before = torch.get_num_threads()
    if count is not None and count != before:
        torch.set_num_threads(count)
    try:
        yield torch.get_num_threads()
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Collect once, then keep Python's garbage collector off inside the block (and restore it)."""
    # A collection in the middle of a sample is noise that belongs to no iteration.
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def peak_memory(
    fn: Callable[[], object], backend: Backend, settings: MeasureSettings, device: str
) -> tuple[int | None, str]:
    """Peak memory of a call of ``fn`` under the backend's probe and how it was read, or None and why not:
    ``off`` if disabled, ``unknown: ...`` where the probe cannot tell."""
    if not settings.memory:
        return None, "off"
    with torch_threads(settings.threads_for(device)), gc_paused(), backend.track_memory() as probe:
        for _ in probe.calls():
            fn()
            backend.synchronize()
    if probe.peak_bytes is None:
        return None, probe.reason or f"unknown: {probe.method} gave no peak"
    return probe.peak_bytes, probe.method


def measurement_of(
    result: SamplingResult,
    backend: Backend,
    settings: MeasureSettings,
    plan: SamplingPlan,
    *,
    name: str,
    device: str,
    work: Mapping[str, float],
    threads: int,
    samples: tuple[float, ...] | None = None,
    stop_reason: str | None = None,
    memory: tuple[int | None, str] = (None, "off"),
    observer: Callable[[Check], None] | None = None,
    host: Sequence[float | None] = (),
    clocks: ClockSummary | None = None,
) -> Measurement:
    """The Measurement of a sampling result: ``samples`` and ``stop_reason`` override the result's own
    (paired rounds keep one step's share of each round); ``host`` are host launch seconds per call of the
    blocks on an asynchronous device (the last ones match the kept samples)."""
    description = backend.describe()
    kept = result.samples if samples is None else samples
    # A sample is one call timed alone when its block held one call (a graph of one call in graph mode); paired
    # rounds keep a step's share of each round, which is no single call.
    single = samples is None and result.iterations == 1 and (settings.mode != "graph" or settings.per_call)
    measurement = Measurement(
        name=name,
        device=device,
        device_name=str(description.get("name", device)),
        samples=kept,
        iterations=result.iterations,
        warmup=result.warmup,
        converged=result.converged,
        stop_reason=result.stop_reason if stop_reason is None else stop_reason,
        sampling_seconds=result.seconds,
        target=plan.target,
        confidence=plan.confidence,
        work=dict(work),
        peak_memory=memory[0],
        memory_method=memory[1],
        threads=threads,
        timer=backend.timer,
        clocks=clocks,
        inconclusive=settings.inconclusive,
        mode=settings.mode,
        host_per_call=_host_per_call(host, len(kept)),
        single_calls=single,
        observer=observer,
    )
    if measurement.no_device_work:
        warnings.warn(
            f"{name}: timed on {device} but ran no work on {device}: the device clock saw "
            f"{format_duration(measurement.median)} per call for {format_duration(measurement.host_per_call or 0)} "
            f"of host time; are the step's tensors and model on {device}?",
            NoDeviceWorkWarning,
            stacklevel=3,
        )
    return measurement


def _host_per_call(host: Sequence[float | None], kept: int) -> float | None:
    """Median host launch seconds per call of the last ``kept`` blocks; None unless every one of them has one."""
    last = host[-kept:] if kept else []
    if len(last) < kept or not last or any(h is None for h in last):
        return None
    return median([h for h in last if h is not None])


class HostTimes:
    """Host launch seconds per call of every block timed through it (None where the backend reports none)."""

    def __init__(self, backend: Backend, run_block: Callable[[int], float]) -> None:
        self.backend = backend
        self.run_block = run_block
        self.per_call: list[float | None] = []

    def __call__(self, iterations: int) -> float:
        seconds = self.run_block(iterations)
        host = self.backend.last_host
        self.per_call.append(None if host is None else host / iterations)
        return seconds

    def last(self) -> float | None:
        return self.backend.last_host


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
    with torch_threads(settings.threads_for(device)) as threads, clock_monitor(backend) as monitor:
        host = HostTimes(backend, block_timer(backend, fn, settings.mode, per_call=settings.per_call))
        block = host if coordinator is None else coordinator.wrap_block(host)
        block = monitored(block, monitor)
        with gc_paused():
            result = sample(
                block, plan, clock=clock, agree=coordinator.agree if coordinator else _same, host_time=host.last
            )
    memory = peak_memory(fn, backend, settings, device)
    return measurement_of(
        result,
        backend,
        settings,
        plan,
        name=name,
        device=device,
        work=work,
        threads=threads,
        memory=memory,
        observer=observer,
        host=host.per_call,
        clocks=None if monitor is None else monitor.summary(len(result.samples)),
    )


def measure_fixed(
    target: Callable[..., Any],
    backend: Backend,
    settings: MeasureSettings,
    *,
    name: str,
    device: str,
    work: Mapping[str, float],
    rounds: int,
    iterations: int = 1,
    warmup_rounds: int = 0,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    setup: Callable[[], Any] | None = None,
    teardown: Callable[..., object] | None = None,
    observer: Callable[[Check], None] | None = None,
    caller: str = "measure_fixed",
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[Measurement, Any]:
    """Measure a fixed budget, kept exactly (pytest-benchmark's ``pedantic``); (the Measurement, the last result).

    ``warmup_rounds`` untimed rounds, then ``rounds`` samples of ``iterations`` calls of
    ``target(*args, **kwargs)`` each. ``setup`` runs before each round and ``teardown``
    (with the round's arguments) after it, both outside the time; a ``setup`` that returns
    ``(args, kwargs)`` gives the round's arguments. No warmup until steady, no stop rule:
    the interval is the one the budget gives (none under 6 rounds), and the step is not
    run again for its peak memory. ValueError names a bad budget (pytest-benchmark's
    messages); ``caller`` names the budget in the stop reason.
    """
    _check_budget(rounds, warmup_rounds, iterations, setup)
    fixed_args, fixed_kwargs = tuple(args), dict(kwargs or {})

    def arguments() -> tuple[tuple[Any, ...], dict[str, Any]]:
        if setup is None:
            return fixed_args, fixed_kwargs
        made = setup()
        if not made:
            return fixed_args, fixed_kwargs
        if fixed_args or fixed_kwargs:
            raise TypeError("Can't use `args` or `kwargs` if `setup` returns the arguments.")
        new_args, new_kwargs = made
        return tuple(new_args), dict(new_kwargs)

    results: list[Any] = []

    def one_round() -> float:
        call_args, call_kwargs = arguments()

        def call() -> object:
            out = target(*call_args, **call_kwargs)
            results[:] = [out]
            return out

        try:
            return block_timer(backend, call, settings.mode, per_call=settings.per_call)(iterations)
        finally:
            if teardown is not None:
                teardown(*call_args, **call_kwargs)

    began = clock()
    with torch_threads(settings.threads_for(device)) as threads, gc_paused():
        warm = [one_round() / iterations for _ in range(warmup_rounds)]
        warmed = clock()
        samples = tuple(one_round() / iterations for _ in range(rounds))
    sampled = clock() - warmed
    result = SamplingResult(
        samples,
        iterations,
        Warmup(warmup_rounds, warmup_rounds * iterations, warmed - began, warmup_rounds > 0, tuple(warm)),
        *_fixed_verdict(samples, f"{caller}'s fixed budget: {rounds} rounds x {iterations} iterations", settings),
        sampled,
    )
    measurement = measurement_of(
        result,
        backend,
        settings,
        settings.plan(backend.min_block_time),
        name=name,
        device=device,
        work=work,
        threads=threads,
        # Running the step again for its memory would add calls to a budget the user fixed.
        memory=(None, f"off: {caller} runs its own budget only"),
        observer=observer,
    )
    return measurement, results[0]


def _check_budget(rounds: int, warmup_rounds: int, iterations: int, setup: Callable[[], Any] | None) -> None:
    """pytest-benchmark's own checks of a pedantic budget, with its messages."""
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
        raise ValueError("Must have positive int for `iterations`.")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError("Must have positive int for `rounds`.")
    if not isinstance(warmup_rounds, int) or isinstance(warmup_rounds, bool) or warmup_rounds < 0:
        raise ValueError("Must have positive int for `warmup_rounds`.")
    if iterations > 1 and setup:
        raise ValueError("Can't use more than 1 `iterations` with a `setup` function.")


def _fixed_verdict(samples: Sequence[float], budget: str, settings: MeasureSettings) -> tuple[bool, str]:
    """(converged, stop reason) of a fixed budget: did its interval reach the target, and what it was."""
    plan = settings.plan()
    summary = summarize(samples, plan.confidence)
    if summary.ci.falls_short(plan.confidence):
        return False, f"{budget}; a {plan.confidence:.0%} interval needs {min_samples_for(plan.confidence)} rounds"
    width = summary.ci.relative_half_width(summary.median)
    if width > plan.target:
        return False, f"{budget}; CI half-width {width:.2%} > target {plan.target:.2%}"
    return True, f"{budget}; CI half-width {width:.2%} <= target {plan.target:.2%}"


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
