"""Timing a step cannot fool (issue 34, item 4): three checks read beside the samples, each a flag on the row.

Kernel benchmarks in the field were found timing wrong while looking right. What is checked, and how:

- **Device work after the end event.** On CUDA the event pair brackets what the *current* stream ran. Work a step
  launches on a stream the current stream never waits for runs on after the block's end event, outside its time.
  After every block, outside its time, the device is synchronized as a whole (``Backend.synchronize``: every
  stream of the device) and that wait is read on the host clock: after an honest block it is the call's own cost
  (microseconds), after a block that left work behind it is what the event pair left out. Flagged (``drain``)
  where its median over the kept blocks is over ``DRAIN_SHARE`` of a block's time and over ``DRAIN_FLOOR``. In
  paired rounds a block is a round of every step, so the flag is the rounds', not one step's.
- **Work that falls after the first call.** The warmup's first call is a block of its own, whose time sizes
  nothing (``_sampling.py``): it runs under the work profile's counting mode (``_WorkCounter``: the aten ops
  dispatched and their FLOPs). The work profile after timing counts a later call with the same FLOP formulas
  (``WorkProfile.flops``) and the ops of the profiled calls (torch.profiler's, which records every dispatched op
  and the composite ops above them: at least as many as the mode sees). Flagged (``fell``) where the later FLOPs
  are under ``FLOPS_KEPT`` of the first call's, or the later ops under ``OPS_KEPT`` of its ops (a first call's
  lazy work, such as an optimizer's state, honestly adds some). No new call of the step is made for it.
- **Above the datasheet.** Where the expectations file (``expectations_path``) knows the device, its fastest FLOP/s
  figure and its memory bandwidth are ceilings; a rate more than ``CEILING_MARGIN`` above one is flagged
  (``above``): a FLOP count that is too high, or bytes that did not come from memory (a persisting L2 window, a
  buffer that fits in the cache).

What none of them sees is in ``docs/limitations.md`` (section 'Timing a step can fool'). The flags are derived from
the value kept in the measurement's JSON (``timing_checks``) and the measurement's own figures (its throughput, its
work profile), so a file read back shows the same flags (``timing_flags``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ._backends import Backend, CudaBackend
from ._expectations import Expectations, ExpectationsError, expectations_path
from ._reading import After, Around, Reading
from ._stats import median
from ._units import Quantity, format_duration, format_rate

if TYPE_CHECKING:
    from ._measurement import Measurement
    from ._profile import WorkProfile
    from ._profiler import _WorkCounter

__all__ = [
    "CEILING_MARGIN",
    "DRAIN_FLOOR",
    "DRAIN_SHARE",
    "FLOPS_KEPT",
    "OPS_KEPT",
    "TIMING_CHECKS",
    "Counted",
    "Drain",
    "Peak",
    "TimingChecks",
    "TimingFlagged",
    "datasheet_peaks",
    "timing_flags",
]

#: Device work after the end event is flagged where the device-wide drain waited longer than this share of the
#: block's time ...
DRAIN_SHARE: Final = 0.05
#: ... and longer than this (a synchronize of an idle device costs microseconds).
DRAIN_FLOOR: Final = 20e-6
#: A later call's FLOPs under this share of the first call's are flagged: FLOPs follow the shapes, not the clock.
FLOPS_KEPT: Final = 0.9
#: A later call's ops under this share of the first call's are flagged: a first call's lazy work (an optimizer's
#: state, a lazy module's weights) adds some ops honestly (a fresh Adam on a small MLP: 85 ops, then 73).
OPS_KEPT: Final = 0.5
#: A rate more than this share above the device's datasheet ceiling is flagged.
CEILING_MARGIN: Final = 0.05
#: The units whose rates have a datasheet ceiling, and the expectations file's block of each (None: its top level).
_CEILINGS: Final = {"FLOP": None, "B": "bandwidth"}


@dataclass(frozen=True)
class Drain:
    """The device-wide drain after each kept block: how many were read, the median wait (seconds, host clock) and
    its median share of the block's time, the longest wait; ``rounds``: the blocks were paired rounds of several
    steps (the wait is the round's, not this step's)."""

    blocks: int
    wait: float
    share: float
    longest: float
    rounds: bool = False

    @property
    def flagged(self) -> bool:
        return self.share > DRAIN_SHARE and self.wait > DRAIN_FLOOR


@dataclass(frozen=True)
class Counted:
    """What the counting mode saw in one call: the aten ops dispatched, and their FLOPs."""

    ops: int
    flops: int


@dataclass(frozen=True)
class Peak:
    """A datasheet ceiling of a device: ``unit`` per second (``FLOP/s``, ``B/s``), the figure, and where it is from."""

    unit: str
    value: float
    what: str


@dataclass(frozen=True)
class TimingChecks:
    """What the checks read (the module's docstring): the drain after the kept blocks (None: not on this device),
    the first call's counts (None: not counted, ``uncounted`` says why where it could have been), and the device's
    datasheet ceilings."""

    drain: Drain | None = None
    first_call: Counted | None = None
    uncounted: str = ""
    peaks: tuple[Peak, ...] = ()

    @property
    def empty(self) -> bool:
        return self.drain is None and self.first_call is None and not self.uncounted and not self.peaks

    def to_dict(self) -> dict[str, Any]:
        drain = self.drain
        first = self.first_call
        return {
            "drain": None
            if drain is None
            else {
                "blocks": drain.blocks,
                "wait_s": drain.wait,
                "share": drain.share,
                "longest_s": drain.longest,
                "rounds": drain.rounds,
            },
            "first_call": None if first is None else {"ops": first.ops, "flops": first.flops},
            **({"uncounted": self.uncounted} if self.uncounted else {}),
            "peaks": [{"unit": p.unit, "peak": p.value, "what": p.what} for p in self.peaks],
        }

    @classmethod
    def from_dict(cls, data: object) -> TimingChecks | None:
        if not isinstance(data, Mapping):
            return None
        d, f = data.get("drain"), data.get("first_call")
        drain = None
        if isinstance(d, Mapping):
            drain = Drain(
                int(d["blocks"]), float(d["wait_s"]), float(d["share"]), float(d["longest_s"]), bool(d["rounds"])
            )
        first = Counted(int(f["ops"]), int(f["flops"])) if isinstance(f, Mapping) else None
        peaks = tuple(Peak(str(p["unit"]), float(p["peak"]), str(p["what"])) for p in data.get("peaks", ()))
        return cls(drain, first, str(data.get("uncounted", "")), peaks)


# ---------------------------------------------------------------- the flags


def timing_flags(m: Measurement) -> list[str]:
    """The timing checks' flags of ``m`` (the module's docstring), in words; [] where nothing was flagged."""
    checks = m.reading(TIMING_CHECKS)
    if checks is None:
        return []
    out = []
    drain = checks.drain
    if drain is not None and drain.flagged:
        rounds = " in its paired rounds" if drain.rounds else ""
        out.append(f"device work after end event{rounds} ({format_duration(drain.wait)}/block, {drain.share:.0%})")
    fell = _fell(checks.first_call, m.profile)
    if fell:
        out.append(f"work fell after first call ({fell})")
    out += _above(checks.peaks, m)
    return out


def _fell(first: Counted | None, profile: WorkProfile | None) -> str:
    """What fell between the first call and the work profile's calls after timing ("" where nothing did, or where
    either was not counted)."""
    if first is None or profile is None or profile.calls < 1:
        return ""
    parts = []
    later = profile.flops
    if later is not None and first.flops > 0 and later < FLOPS_KEPT * first.flops:
        parts.append(f"{Quantity(first.flops, 'FLOP')} -> {Quantity(later, 'FLOP')}")
    ops = sum(op.count for op in profile.ops) / profile.calls
    if first.ops > 0 and ops < OPS_KEPT * first.ops:
        parts.append(f"ops {first.ops} -> {ops:.4g}/call")
    return ", ".join(parts)


def _above(peaks: Sequence[Peak], m: Measurement) -> list[str]:
    """A rate over its ceiling (by ``CEILING_MARGIN``); a step that ran on several devices (its memory says so)
    is held to as many times the ceiling."""
    devices = max(1, len(m.memory.devices))
    out = []
    for peak in peaks:
        unit = peak.unit.removesuffix("/s")
        if unit not in m.work or not m.median > 0:
            continue
        rate = m.throughput(unit).value
        if rate > (1 + CEILING_MARGIN) * peak.value * devices:
            of = f" x {devices} devices" if devices > 1 else ""
            out.append(f"above datasheet ({format_rate(rate, unit)} > {format_rate(peak.value, unit)}{of})")
    return out


# ---------------------------------------------------------------- the ceilings


def datasheet_peaks(backend: Backend, path: Path | None = None) -> tuple[Peak, ...]:
    """The ceilings of a named CUDA device that the expectations file (``path``, else ``expectations_path``) knows:
    its fastest FLOP/s figure, its memory bandwidth; none for other backends, an unknown device, a MIG slice, or a
    file that cannot be read (the measurement goes on without them)."""
    if not isinstance(backend, CudaBackend):
        return ()
    where = expectations_path() if path is None else path
    if where is None:
        return ()
    name = str(backend.describe().get("name", ""))
    peaks = []
    for unit, section in _CEILINGS.items():
        try:
            floors = Expectations.load(where, section).for_device(name)
        except ExpectationsError:
            continue
        if floors is None:
            continue
        figures = {w: q for w in floors.datasheet if (q := floors.ceiling(w)) is not None and q.unit == f"{unit}/s"}
        if figures:
            workload = max(figures, key=lambda w: figures[w].value)
            figure = figures[workload]
            peaks.append(Peak(figure.unit, figure.value, f"{floors.key} datasheet {workload} {figure}"))
    return tuple(peaks)


# ---------------------------------------------------------------- the sensor


@dataclass
class _Sensor:
    """Told after every block: the device-wide drain (``synchronize``, timed on ``clock``), and the first block's
    counts (``counter`` is entered before it and left after it)."""

    synchronize: Callable[[], object] | None
    clock: Callable[[], float]
    counter: _WorkCounter | None
    paired: bool
    uncounted: str = ""
    first: Counted | None = None
    waits: list[float] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)

    def after_block(self, iterations: int, seconds: float) -> None:
        if self.synchronize is not None:
            began = self.clock()
            self.synchronize()
            wait = self.clock() - began
            self.waits.append(wait)
            self.shares.append(wait / seconds if seconds > 0 else 0.0)
        self.stop_counting()

    def stop_counting(self) -> None:
        counter, self.counter = self.counter, None
        if counter is not None:
            counter.__exit__(None, None, None)
            self.first = Counted(counter.ops, counter.flops)

    def value(self, samples: int) -> TimingChecks:
        waits = self.waits[-samples:] if samples > 0 else []
        shares = self.shares[-samples:] if samples > 0 else []
        drain = Drain(len(waits), median(waits), median(shares), max(waits), self.paired) if waits else None
        return TimingChecks(drain, self.first, self.uncounted)


def why_uncounted(around: Around, modules: Collection[str] | None = None, *, compile_aware: bool | None = None) -> str:
    """Why the first call is not counted where it could be; "" to count it. ``modules``: the modules imported
    (``sys.modules``); ``compile_aware``: whether torch's dispatch modes can step aside for torch.compile
    (``TorchDispatchMode.ignore_compile_internals``, which torch 2.13 has; None: ask this torch)."""
    if around.paired:
        return "paired rounds: a round's first block is every step's, after their builds"
    if around.settings.mode != "warm":
        return f"{around.settings.mode} mode: its first block holds the backend's own work (a flush, a graph)"
    aware = _compile_aware() if compile_aware is None else compile_aware
    if not aware and "torch._dynamo" in (sys.modules if modules is None else modules):
        # A compiled function whose first call runs under a dispatch mode that cannot step aside is never compiled.
        return "torch.compile is loaded, and this torch's dispatch modes would keep a first call from compiling"
    return ""


def _compile_aware() -> bool:
    from torch.utils._python_dispatch import TorchDispatchMode

    return hasattr(TorchDispatchMode, "ignore_compile_internals")


def _counter() -> _WorkCounter | None:
    from ._profiler import _WorkCounter

    try:
        return _WorkCounter(ignore_compile_internals=True)
    except Exception:  # noqa: BLE001 - a torch without the counters: nothing counted, the measurement goes on
        return None


# ---------------------------------------------------------------- the gate


@dataclass(frozen=True)
class TimingFlagged:
    """The timing checks' flags of each side of a gate row: the row's times, and so its ratio, may be wrong where
    there is one. It fails nothing itself (no verdict is made of it); the row says it."""

    base: tuple[str, ...]
    head: tuple[str, ...]

    def failing(self, fail_on: Collection[str]) -> list[str]:
        return []

    def summary(self, fail_on: Collection[str]) -> str | None:
        sides = [f"{side}: {'; '.join(flags)}" for side, flags in (("base", self.base), ("head", self.head)) if flags]
        if not sides:
            return None
        return f"timing checks flagged it, its times and ratio may be wrong: {' | '.join(sides)}"

    def details(self, limit: int | None = None) -> list[str]:
        return []

    def to_dict(self, fail_on: Collection[str]) -> dict[str, Any]:
        return {"base": list(self.base), "head": list(self.head)}


# ---------------------------------------------------------------- the reading


class _TimingChecks(Reading[TimingChecks]):
    name = "timing_checks"
    change_key = "timing_checks"

    @contextmanager
    def open(self, around: Around) -> Iterator[_Sensor]:
        backend = around.backend
        cuda = isinstance(backend, CudaBackend)
        uncounted = why_uncounted(around)
        counter = None if uncounted else _counter()
        sensor = _Sensor(
            backend.synchronize if cuda else None,
            backend.clock if isinstance(backend, CudaBackend) else around.clock,
            counter,
            around.paired,
            uncounted,
        )
        if counter is not None:
            counter.__enter__()
        try:
            yield sensor
        finally:
            sensor.stop_counting()  # a first block that raised: the mode is left all the same

    def after(self, after: After, sensor: object) -> TimingChecks | None:
        read = sensor.value(len(after.result.samples)) if isinstance(sensor, _Sensor) else TimingChecks()
        first, uncounted = read.first_call, read.uncounted
        if after.distributed and first is not None:
            first, uncounted = None, "a distributed run: the coordinator's collectives run in the first block"
        checks = TimingChecks(read.drain, first, uncounted, datasheet_peaks(after.backend))
        return None if checks.empty else checks

    def to_json(self, value: TimingChecks) -> dict[str, Any]:
        return value.to_dict()

    def decode(self, data: Mapping[str, Any]) -> TimingChecks | None:
        return TimingChecks.from_dict(data.get(self.name))

    def flags(self, m: Measurement) -> list[str]:
        return timing_flags(m)

    def notes(self, measurements: Sequence[Measurement]) -> list[str]:
        flagged = sum(1 for m in measurements if timing_flags(m))
        if not flagged:
            return []
        return [
            f"timing checks: {flagged} of {len(measurements)} records flagged; their times may not be what a loop "
            "of the step pays (docs/limitations.md, section 'Timing a step can fool')"
        ]

    def facts(self, m: Measurement) -> list[tuple[str, str]]:
        checks = m.reading(self)
        if checks is None:
            return []
        parts = []
        if checks.drain is not None:
            drain = checks.drain
            parts.append(
                f"device-wide drain after a block {format_duration(drain.wait)} (median of {drain.blocks}, "
                f"{drain.share:.1%} of a block; longest {format_duration(drain.longest)})"
            )
        if checks.first_call is not None:
            parts.append(f"first call {checks.first_call.ops} ops, {checks.first_call.flops:.4g} FLOP")
        elif checks.uncounted:
            parts.append(f"first call not counted: {checks.uncounted}")
        parts += [f"ceiling {format_rate(p.value, p.unit.removesuffix('/s'))} ({p.what})" for p in checks.peaks]
        flags = timing_flags(m)
        parts.append(f"flagged: {'; '.join(flags)}" if flags else "nothing flagged")
        return [("timing checks", "; ".join(parts))]

    def compare(self, base: Sequence[Measurement], head: Sequence[Measurement]) -> TimingFlagged | None:
        sides = [tuple(dict.fromkeys(flag for m in side for flag in timing_flags(m))) for side in (base, head)]
        return TimingFlagged(*sides) if any(sides) else None


#: Device work after the end event, work that falls after the first call, a rate above the datasheet.
TIMING_CHECKS: Final = _TimingChecks()
