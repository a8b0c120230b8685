"""An immutable Measurement: raw samples kept, statistics derived, assertions judged by their interval.

Assertions go through the one interval judge (``_judge.py``): pass when the whole
confidence interval of the median is on the right side of the bound, fail when it is
wholly on the wrong side, inconclusive when it straddles the bound or when too few
samples were taken for an interval at the confidence asked for (6 at 95%).

A sample is one block of calls timed together, and its value is the block's mean time
per call. Where each block held one call (``single_calls``: a block size of 1, forced
with ``--gpuperf-per-call``), the samples are calls and their percentiles are per-call
percentiles (p50, p90, p99); ``assert_latency(percentile=99)`` judges the quantile's own
distribution-free interval. Means of blocks have no per-call percentiles: they are refused.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final, TypeVar

from ._backends import CUDA_EVENT_TIMER
from ._clocks import CLOCKS, ClockSummary
from ._energy import ENERGY, EnergySummary
from ._judge import Check, JudgeContext, Relation, check_bound, judge
from ._memory import MEMORY, NOT_READ, MemoryReading
from ._profile import WorkProfile, varying_between
from ._profiler import PROFILE
from ._reading import Reading, readings
from ._sampling import Warmup
from ._stats import (
    Estimate,
    Interval,
    Summary,
    Trend,
    counted_as,
    min_samples_for,
    quantile,
    quantile_ci,
    summarize,
    trend,
)
from ._timing_checks import TIMING_CHECKS, TimingChecks, timing_flags
from ._units import Quantity, UnitError, format_duration, parse_quantity
from ._values import (
    MAX_COUNT,
    FieldError,
    stored,
    stored_count,
    stored_flag,
    stored_map,
    stored_number,
    stored_numbers,
    stored_text,
)

__all__ = ["BUILTIN_READINGS", "DRIFT_MIN", "DRIFT_P", "PERCENTILES", "Measurement", "NoDeviceWorkWarning"]

V = TypeVar("V")

#: What is read beside every measurement's samples, in order (``_reading.py``): sensors open in this order (energy
#: reads NVML through the clocks' session; the timing checks come first, so that their drain follows the block at
#: once); the results tables show their columns, the HTML report their facts and the gate their changes in it.
BUILTIN_READINGS: Final[tuple[Reading[Any], ...]] = (TIMING_CHECKS, CLOCKS, ENERGY, PROFILE, MEMORY)

#: A device block shorter than this (and than NO_WORK_FRACTION of the host's time) ran no device work.
NO_WORK_BLOCK: Final = 5e-6
NO_WORK_FRACTION: Final = 0.01
#: Significance level of the trend test that flags a drifting measurement.
DRIFT_P: Final = 0.001
#: ... and the smallest change over the run that is flagged.
DRIFT_MIN: Final = 0.01
#: The per-call percentiles reported for samples of single calls.
PERCENTILES: Final = (50, 90, 99)


class NoDeviceWorkWarning(UserWarning):
    """A step timed on a GPU ran no work there (its tensors were left on the CPU, say)."""


@dataclass(frozen=True)
class Measurement:
    name: str
    device: str
    device_name: str
    #: seconds per call, one value per sample
    samples: tuple[float, ...]
    iterations: int
    warmup: Warmup
    converged: bool
    stop_reason: str
    sampling_seconds: float
    target: float
    confidence: float
    #: work done by one call, by unit: {"FLOP": 2 * n**3, "samples": 256}
    work: Mapping[str, float] = field(default_factory=dict)
    threads: int = 0
    timer: str = ""
    inconclusive: str = "warn"
    #: timing mode: warm, cold or graph (``MeasureSettings.mode``)
    mode: str = "warm"
    #: median host seconds per call over a block, on devices that run asynchronously (else None: a CPU, whose
    #: samples are host time, and a step that synchronizes, whose host time is the loop's)
    host_per_call: float | None = None
    #: each sample is one call timed alone (a block of one call), so percentiles of the samples are per call
    single_calls: bool = False
    observer: Callable[[Check], None] | None = field(default=None, compare=False, repr=False)
    #: median device seconds per call with the queue kept full (behind the lead), where that differs from the
    #: sample (an asynchronous device; None for a step that synchronizes, and on a CPU)
    device_per_call: float | None = None
    #: kept samples whose lead ended before the host had launched their block, where the sample is the device's time
    #: (the device may have idled inside it)
    short_leads: int = 0
    #: each sample is one call's latency, from the call to its result (``--gpuperf-per-call``)
    latency: bool = False
    #: why the measurement could not keep to ``max_time`` (one call longer than what was left of it), and what
    #: it left out for that; "" where it kept to it
    over_time: str = ""
    #: what was read beside the samples, by reading name (``_reading.py``): ``memory``, ``clocks``, ``energy``,
    #: ``profile`` and any registered; a reading that read nothing has no entry
    readings: Mapping[str, Any] = field(default_factory=dict)

    def reading(self, of: Reading[V]) -> V | None:
        """The value ``of`` read, or None where it read none."""
        value: V | None = self.readings.get(of.name)
        return value

    def with_reading(self, of: Reading[V], value: V | None) -> Measurement:
        """This measurement with ``value`` as what ``of`` read (None: nothing)."""
        values = {name: v for name, v in self.readings.items() if name != of.name}
        return dataclasses.replace(self, readings=values if value is None else {**values, of.name: value})

    def with_varying_counts(self, again: Measurement) -> Measurement:
        """This measurement with every count that differs in ``again`` (the step measured again) left out of the
        gate's comparisons as varying (``varying_between``); as it is where either has no profile."""
        mine, theirs = self.profile, again.profile
        if mine is None or theirs is None:
            return self
        return self.with_reading(PROFILE, varying_between(mine, theirs))

    @property
    def memory(self) -> MemoryReading:
        """The memory of a call, read after timing: its high-water mark (``peak``, CUDA: ``max_memory_allocated``
        after a reset at its start: weights, gradients, optimizer state, inputs and activations; a CPU: the
        process's RSS high-water mark), how it was read (``method``, or why there is none: ``off``,
        ``unknown: ...``), the level at its start, the growth above it (``transient``), the allocator's reserved
        high-water mark (CUDA), each device's high-water mark (several devices)."""
        return self.reading(MEMORY) or NOT_READ

    @property
    def clocks(self) -> ClockSummary | None:
        """The GPU's clocks over the samples, and which samples were throttled (None: not read, ``_clocks.py``)."""
        return self.reading(CLOCKS)

    @property
    def energy(self) -> EnergySummary | None:
        """The energy of the sampled blocks, or why there is none (None: not read; ``_energy.py``)."""
        return self.reading(ENERGY)

    @property
    def timing_checks(self) -> TimingChecks | None:
        """What the timing checks read (device work after the end event, the first call's counts, the datasheet's
        ceilings; ``_timing_checks.py``; None: none read); their flags are ``timing_flags``."""
        return self.reading(TIMING_CHECKS)

    @property
    def timing_flags(self) -> list[str]:
        """The timing checks' flags, in words (the row's): [] where nothing was flagged."""
        return timing_flags(self)

    @property
    def profile(self) -> WorkProfile | None:
        """What the step did, read after timing outside the samples (``_profiler.py``; None: off, not read, or the
        profiler could not start)."""
        return self.reading(PROFILE)

    # ------------------------------------------------------------ statistics

    @cached_property
    def summary(self) -> Summary:
        return summarize(self.samples, self.confidence)

    @property
    def median(self) -> float:
        """Median seconds per call."""
        return self.summary.median

    @property
    def ci(self) -> Interval:
        """Distribution-free confidence interval of the median time per call."""
        return self.summary.ci

    @property
    def iqr(self) -> float:
        return self.summary.iqr

    @property
    def cv(self) -> float:
        return self.summary.cv

    @property
    def host_bound(self) -> bool:
        """Did the host need longer for a call than the device? Then a loop runs at the host's speed, and each
        sample is the host's time (a sample is the larger of the two)."""
        host = self.host_per_call
        return host is not None and host >= self._device_time > 0 and not self.no_device_work

    @property
    def no_device_work(self) -> bool:
        """Timed on an asynchronous device whose clock saw next to nothing: the step's work ran elsewhere."""
        host, device = self.host_per_call, self._device_time
        return host is not None and device < NO_WORK_FRACTION * host and device * self.iterations < NO_WORK_BLOCK

    @property
    def sample_kind(self) -> str:
        """What a sample times, for the gate's comparability rule: the loop's time (the larger of device and host
        time on CUDA), or one call's latency from call to result. On a host clock a call alone and a block of calls
        time the same thing."""
        if self.timer != CUDA_EVENT_TIMER:
            return "host clock"
        return "call to result" if self.latency else "the loop's time"

    @property
    def _device_time(self) -> float:
        """Device seconds per call; the median where none is kept beside a host time (a step that synchronizes)."""
        return self.median if self.device_per_call is None else self.device_per_call

    @property
    def percentiles(self) -> dict[int, float] | None:
        """Per-call p50, p90 and p99 in seconds where every sample is one call, else None (means of blocks)."""
        if not self.single_calls:
            return None
        return {p: self.percentile(p) for p in PERCENTILES}

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile (0 < p < 100) of the time per call; ValueError for means of blocks."""
        return quantile(self.samples, self._quantile_of(p, "percentile"))

    def percentile_ci(self, p: float) -> Interval:
        """Distribution-free interval of the ``p``-th percentile per call (its ``confidence`` falls short of the
        measurement's with fewer than ``min_samples_for(confidence, p / 100)`` samples: 368 for p99 at 95%)."""
        return quantile_ci(self.samples, self._quantile_of(p, "percentile_ci"), self.confidence)

    def percentile_text(self, p: float) -> str:
        """A per-call percentile as the tables show it: ``2.95 us``; ``- (45 samples)`` where they are too few
        for its interval (368 for p99 at 95%); ``-`` for means of blocks, which have none."""
        if not self.single_calls:
            return "-"
        if len(self.samples) < min_samples_for(self.confidence, p / 100.0):
            return f"- ({counted_as(len(self.samples), 'samples')})"
        return format_duration(self.percentile(p))

    def _quantile_of(self, p: float, call: str) -> float:
        """``p`` as a fraction, once checked, for samples that are single calls."""
        __tracebackhide__ = True
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 100:
            raise ValueError(f"{call}(percentile={p!r}): the percentile must be a number between 0 and 100, such as 99")
        if not self.single_calls:
            if self.iterations > 1:
                what = f"the mean of a block of {self.iterations} calls"
            else:
                what = "a share of a CUDA graph replay of several calls"
            raise ValueError(
                f"{self.name}: {call}(percentile={p:g}) needs per-call times, but each sample here is {what}, "
                "and percentiles of such means are not percentiles of calls; time calls one per sample with "
                "--gpuperf-per-call (@pytest.mark.gpuperf(per_call=True), or measure(..., per_call=True))"
            )
        return p / 100.0

    @cached_property
    def trend(self) -> Trend:
        return trend(self.samples)

    @property
    def drift(self) -> float | None:
        """The change over the run (+0.086: 8.6% slower by the end) when the samples trend, else None.

        A trend is flagged when Mann-Kendall's test is significant at ``DRIFT_P`` and the
        change is larger than the claimed interval (and 1%): the interval assumes samples
        that do not drift, so it understates the uncertainty then.
        """
        t = self.trend
        if t.p_value < DRIFT_P and abs(t.change) > max(self.relative_ci, DRIFT_MIN):
            return t.change
        return None

    @property
    def relative_ci(self) -> float:
        """Half-width of the CI relative to the median (0.01 is +-1%)."""
        return self.ci.relative_half_width(self.median)

    @property
    def too_few_samples(self) -> bool:
        """Too few samples for an interval at ``confidence`` (6 at 95%): ``ci`` is their full range, covering less."""
        return self.ci.falls_short(self.confidence)

    @property
    def ci_text(self) -> str:
        """The CI as the tables show it: ``+-1.2%``, or ``- (3 samples)`` where too few samples claim none."""
        if self.too_few_samples:
            return f"- ({counted_as(len(self.samples), 'samples')})"
        return f"+-{self.relative_ci:.1%}"

    def throughput(self, unit: str | None = None) -> Quantity:
        """Median throughput in ``unit``/s; the unit defaults to the only (or first) kind of work given."""
        work_unit = self._work_unit(unit)
        return Quantity(self.work[work_unit] / self.median, f"{work_unit}/s")

    def throughput_ci(self, unit: str | None = None) -> tuple[Quantity, Quantity]:
        work_unit = self._work_unit(unit)
        amount = self.work[work_unit]
        return (
            Quantity(amount / self.ci.high, f"{work_unit}/s"),
            Quantity(amount / self.ci.low if self.ci.low > 0 else math.inf, f"{work_unit}/s"),
        )

    def _work_unit(self, unit: str | None) -> str:
        if not self.work:
            raise ValueError(
                f"{self.name}: no work was given, so there is no throughput; "
                "pass flops=, bytes=, samples=, items= or work={{unit: amount}} to measure()"
            )
        if unit is None:
            return next(iter(self.work))
        if unit.endswith("/s"):
            unit = unit[:-2]
        if unit not in self.work:
            raise ValueError(
                f"{self.name}: no {unit!r} work was given (have: {', '.join(self.work)}); "
                f"pass it to measure(), for example work={{{unit!r}: amount}}"
            )
        return unit

    # ------------------------------------------------------------ assertions

    def assert_throughput(
        self, *, at_least: str | Quantity | None = None, at_most: str | Quantity | None = None
    ) -> Measurement:
        """Assert a rate such as ``at_least="50 TFLOP/s"``; the unit picks which work it refers to."""
        __tracebackhide__ = True
        if at_least is None and at_most is None:
            raise ValueError("assert_throughput needs at_least= or at_most=, for example at_least='50 TFLOP/s'")
        bounds = _bounds("assert_throughput", "rate", {"at_least": at_least, "at_most": at_most}, "'50 TFLOP/s'")
        for relation, bound in bounds:
            low, high = self.throughput_ci(bound.work_unit)
            interval = Interval(low.value, high.value, self.ci.confidence)
            self._judge(self._estimate("throughput", self.throughput(bound.work_unit).value, interval), relation, bound)
        return self

    def assert_latency(
        self,
        *,
        at_most: str | float | Quantity | None = None,
        at_least: str | float | Quantity | None = None,
        percentile: float | None = None,
    ) -> Measurement:
        """Assert the time per call, such as ``at_most="3.2 ms"`` (a bare number is seconds).

        The median's interval is judged; with ``percentile=99`` the 99th percentile's, which
        needs samples of one call each (``--gpuperf-per-call``) and enough of them for its
        interval (368 at 95%; from fewer the check is inconclusive and says how many).
        """
        __tracebackhide__ = True
        if at_least is None and at_most is None:
            raise ValueError("assert_latency needs at_most= or at_least=, for example at_most='3.2 ms'")
        q = None if percentile is None else self._quantile_of(percentile, "assert_latency")
        bounds = _bounds("assert_latency", "time", {"at_least": at_least, "at_most": at_most}, "'3.2 ms'")
        for relation, bound in bounds:
            if q is None:
                estimate = self._estimate("latency", self.median, self.ci)
            else:
                interval = quantile_ci(self.samples, q, self.confidence)
                estimate = self._estimate(f"p{q * 100:g} latency", quantile(self.samples, q), interval, q)
            self._judge(estimate, relation, bound)
        return self

    def _estimate(self, what: str, value: float, interval: Interval, q: float | None = None) -> Estimate:
        """``value`` with its interval, as the judge tells it: from how many samples of how many calls, on what,
        why sampling stopped; ``q``: the quantile a percentile estimates (None: the median)."""
        n = len(self.samples)
        return Estimate(
            what,
            value,
            interval.low,
            interval.high,
            interval.confidence,
            n,
            nominal=self.confidence,
            counted="samples",
            quantile=q,
            evidence=f"from {counted_as(n, 'samples')} x {self.iterations} calls on {self.device} ({self.device_name})",
            subject=self.name,
            stopped=self.stop_reason,
        )

    def _judge(self, estimate: Estimate, relation: Relation, bound: Quantity) -> None:
        """Judge ``estimate`` against ``bound``, its values shown in the bound's unit; warnings point at the line
        that called ``assert_*``."""
        __tracebackhide__ = True
        context = JudgeContext(lambda value: str(Quantity(value, bound.unit)), self.inconclusive, self.observer)
        judge(estimate, relation, bound.value, context, stacklevel=3)

    # ------------------------------------------------------------ display and storage

    def describe(self) -> str:
        """One line: median, CI, throughput, samples."""
        parts = [
            f"{self.name} on {self.device}: median {format_duration(self.median)}",
            f"CI {self.ci_text}",
        ]
        for unit in self.work:
            parts.append(str(self.throughput(unit)))
        memory = self.memory.text
        if memory:
            parts.append(memory)
        parts.append(f"{len(self.samples)}x{self.iterations} calls")
        if self.single_calls:
            parts.append(" ".join(f"p{p} {self.percentile_text(p)}" for p in PERCENTILES))
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        s = self.summary
        return {
            "name": self.name,
            "device": self.device,
            "device_name": self.device_name,
            "unit": "s",
            "samples": list(self.samples),
            "iterations": self.iterations,
            "stats": {
                "median": s.median,
                "mean": s.mean,
                "min": s.minimum,
                "max": s.maximum,
                "q1": s.q1,
                "q3": s.q3,
                "stdev": s.stdev,
                "cv": s.cv,
                "ci_low": s.ci.low,
                "ci_high": s.ci.high,
                "ci_confidence": s.ci.confidence,
                **{f"p{p}": v for p, v in (self.percentiles or {}).items()},
            },
            "throughput": {f"{u}/s": self.work[u] / s.median for u in self.work},
            "work": dict(self.work),
            "converged": self.converged,
            "stop_reason": self.stop_reason,
            "sampling_seconds": self.sampling_seconds,
            "target": self.target,
            "confidence": self.confidence,
            "warmup": {
                "blocks": self.warmup.blocks,
                "calls": self.warmup.calls,
                "seconds": self.warmup.seconds,
                "steady": self.warmup.steady,
                "block_times": list(self.warmup.block_times),
                "resizes": self.warmup.resizes,
            },
            "threads": self.threads,
            "timer": self.timer,
            "mode": self.mode,
            "host_per_call": self.host_per_call,
            "single_calls": self.single_calls,
            "device_per_call": self.device_per_call,
            "short_leads": self.short_leads,
            "latency": self.latency,
            **({"over_time": self.over_time} if self.over_time else {}),
            **{key: value for r in readings() for key, value in r.encode(self.readings.get(r.name)).items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        """From a file, or a process that sent it: FieldError (``_values.stored``) names a field that no measurement
        has (``iterations`` of 0, or past 2**53)."""
        count, number, text, flag = stored_count(), stored_number, stored_text, stored_flag
        return cls(
            name=stored(data, "name", text),
            device=stored(data, "device", text),
            device_name=stored(data, "device_name", text, ""),
            samples=stored(data, "samples", stored_numbers),
            iterations=stored(data, "iterations", stored_count(1)),
            warmup=stored(data, "warmup", _warmup),
            converged=stored(data, "converged", flag),
            stop_reason=stored(data, "stop_reason", text, ""),
            sampling_seconds=stored(data, "sampling_seconds", number, 0.0),
            target=stored(data, "target", number),
            confidence=stored(data, "confidence", number, 0.95),
            work=stored(data, "work", _WORK, {}),
            threads=stored(data, "threads", count, 0),
            timer=stored(data, "timer", text, ""),
            mode=stored(data, "mode", text, "warm"),
            host_per_call=stored(data, "host_per_call", number, None),
            single_calls=stored(data, "single_calls", flag, False),
            device_per_call=stored(data, "device_per_call", number, None),
            short_leads=stored(data, "short_leads", count, 0),
            latency=stored(data, "latency", flag, False),
            over_time=stored(data, "over_time", text, ""),
            readings={r.name: value for r in readings() if (value := _decoded(r, data)) is not None},
        )

    def __str__(self) -> str:
        return self.describe()


#: A measurement's work amounts (they and its samples are checked for what no measurement has in ``results``).
_WORK: Final = stored_map(stored_number, MAX_COUNT)


def _warmup(data: object) -> Warmup:
    count, number = stored_count(), stored_number
    return Warmup(
        stored(data, "blocks", count),
        stored(data, "calls", count),
        stored(data, "seconds", number),
        stored(data, "steady", stored_flag),
        stored(data, "block_times", stored_numbers, ()),
        stored(data, "resizes", count, 0),
    )


def _decoded(reading: Reading[V], data: Mapping[str, Any]) -> V | None:
    """``reading``'s value from a measurement's JSON; where its codec refuses it, FieldError names the reading."""
    try:
        return reading.decode(data)
    except FieldError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        raise FieldError(reading.name, "is not what pytest-gpuperf writes there") from None


def _bounds(
    method: str, kind: str, given: Mapping[str, str | float | Quantity | None], example: str
) -> list[tuple[Relation, Quantity]]:
    """Every bound given, parsed and checked (positive and finite) before any is judged."""
    __tracebackhide__ = True
    out: list[tuple[Relation, Quantity]] = []
    for name, raw in given.items():
        if raw is None:
            continue
        call = f"{method}({name}={raw!r})"
        try:
            bound = parse_quantity(raw, kind=kind)
        except UnitError as exc:
            raise UnitError(f"{call}: {exc}") from None
        check_bound(call, bound.value, positive=True, noun=kind, example=f"{name}={example}")
        out.append((">=" if name == "at_least" else "<=", bound))
    return out
