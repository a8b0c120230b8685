"""The memory of a call, read after timing: its high-water mark, the growth above its start, and the gate's exact
comparison of the two.

The backend's probe reads it (``MemoryProbe``: on CUDA the allocator's statistics, on a CPU the process's RSS
high-water mark and torch's allocator events, ``_cpu_memory.py``) over calls of the step made after the samples.
The figure the gate compares is ``MemoryReading.gated``: on CUDA the allocator's high-water mark of a call, on a
CPU the high-water mark of torch's allocator above the call's start (the process's RSS moves between identical
calls and is never gated). Both are counts of bytes, not times: they do not move with the machine's load, so
any increase is *more*. Where a side's own records disagree (several baseline records), the change is called
only beyond the range they span.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._backends import CUDA_PEAK, CUDA_RESERVED, Backend, MemoryProbe
from ._calls import gc_paused, torch_threads
from ._cpu_memory import RSS_METHOD, TRANSIENT_METHOD
from ._reading import After, Reading, Rider
from ._units import format_bytes
from ._values import optional

if TYPE_CHECKING:
    from ._measurement import Measurement
    from ._settings import MeasureSettings

__all__ = ["MEMORY", "OF_AN_EAGER_CALL", "ONE_CALL", "MemoryChange", "MemoryReading", "compare_memory", "peak_memory"]


@dataclass(frozen=True)
class MemoryReading:
    """The memory of one call, as a backend's probe read it (``MemoryProbe``): its high-water mark (``peak``, how it
    was read in ``method``, or None with ``off`` / ``unknown: ...`` there), the level at the call's start, the
    growth above it (``transient``, read as ``transient_method`` says), the allocator's reserved high-water mark
    (read as ``reserved_method`` says: on CUDA from an emptied cache), and each device's high-water mark where the
    call used several."""

    peak: int | None = None
    method: str = "off"
    resident: int | None = None
    transient: int | None = None
    transient_method: str = ""
    reserved: int | None = None
    devices: Mapping[str, int] = field(default_factory=dict)
    reserved_method: str = ""

    @classmethod
    def of(cls, probe: MemoryProbe) -> MemoryReading:
        method = probe.method if probe.peak_bytes is not None else probe.reason or f"unknown: {probe.method} gave none"
        return cls(
            probe.peak_bytes,
            method,
            probe.resident_bytes,
            probe.transient_bytes,
            probe.transient_method,
            probe.reserved_bytes,
            dict(probe.devices),
            str(getattr(probe, "reserved_method", "")),  # a CUDA probe's
        )

    @property
    def process_peak(self) -> bool:
        """``peak`` is the whole process's (a CPU's RSS high-water mark: the interpreter, torch's libraries and the C
        allocator's kept pages included), not the high-water mark of the step's own allocations."""
        return self.peak is not None and self.method == RSS_METHOD

    @property
    def gated(self) -> tuple[int, str] | None:
        """The figure a comparison can gate on, and what it is; None without one. CUDA: the allocator's high-water
        mark (exact). A CPU: the transient from torch's allocator events (exact: the same bytes in 18 of 18 A/A
        calls over 3 processes, 2026-11-26), not the process's RSS, which moves by about 1 MiB between identical
        calls."""
        if self.peak is not None and self.method.startswith(CUDA_PEAK):
            return self.peak, "cuda allocator peak"
        if self.transient is not None and self.transient_method == TRANSIENT_METHOD:
            return self.transient, "cpu allocator peak above the call's start"
        return None

    @property
    def text(self) -> str:
        """The call's memory in words, each figure named: ``peak 51 MiB (resident 16.9 MiB + transient 34.1 MiB)``
        on CUDA, ``transient 24.3 MiB (torch's CPU allocator), process RSS high-water mark 612 MiB`` on a CPU;
        empty where none was read."""
        peak, resident, transient = self.peak, self.resident, self.transient
        if peak is not None and self.process_peak:
            rss = f"process RSS high-water mark {format_bytes(peak)}"
            return rss if transient is None else f"transient {format_bytes(transient)} (torch's CPU allocator), {rss}"
        if peak is not None:  # a device allocator's high-water mark (CUDA)
            if resident is None or transient is None:
                return f"peak {format_bytes(peak)}"
            parts = f"resident {format_bytes(resident)} + transient {format_bytes(transient)}"
            return f"peak {format_bytes(peak)} ({parts})"
        if transient is not None:
            return f"transient {format_bytes(transient)} (no high-water mark known)"
        return ""

    @property
    def cell(self) -> str:
        """The "peak mem" cell, each figure named (``docs/glossary.md``): the call's high-water mark (``51 MiB``);
        ``+24.3 MiB`` for a transient figure (growth above the call's start), the only one of a record where no
        high-water mark is known; ``+24.3 MiB, RSS 612 MiB`` on a CPU, whose only absolute figure is the process's
        (``unknown, RSS 612 MiB`` where the allocator's events could not tell the transient); ``unknown`` where
        the probe could not tell (``method`` says why), ``-`` where it was off."""
        transient = None if self.transient is None else f"+{format_bytes(self.transient)}"
        if self.peak is not None:
            if not self.process_peak:
                return format_bytes(self.peak)
            # The transient part first: it is the step's; "unknown" where the allocator's events could not tell.
            known = transient or ("unknown" if self.transient_method.startswith("unknown") else "-")
            return f"{known}, RSS {format_bytes(self.peak)}"
        if transient is not None:
            return transient
        return "unknown" if self.method.startswith("unknown") else "-"

    @property
    def detail(self) -> str:
        """Every figure named (the cell is the short form): the high-water mark with its resident and transient
        parts, the reserved high-water mark, each device's, and how it was read."""
        text = self.text
        if not text:
            return self.cell if self.method in ("off", "none") else self.method
        if self.reserved is not None:
            text += f", reserved {format_bytes(self.reserved)}"
            text += " with the allocator's cache emptied first" if self.reserved_method == CUDA_RESERVED else ""
        if self.devices:
            text += "; " + ", ".join(f"{device} {format_bytes(n)}" for device, n in self.devices.items())
        how = self.method if self.peak is not None else self.transient_method
        if self.process_peak:
            how = f"{self.transient_method}; {self.method}"
        if self.peak is None and self.method.startswith("unknown"):
            how += f"; no high-water mark: {self.method.removeprefix('unknown: ')}"
        return f"{text} ({how})"

    def to_json(self) -> dict[str, Any]:
        return {
            "peak_memory_bytes": self.peak,
            "memory_method": self.method,
            "memory": {
                "peak": "high-water mark",
                "resident_bytes": self.resident,
                "transient_bytes": self.transient,
                "transient_method": self.transient_method,
                "reserved_bytes": self.reserved,
                "reserved_method": self.reserved_method,
                "devices": dict(self.devices),
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryReading:
        memory = data.get("memory")
        block: Mapping[str, Any] = memory if isinstance(memory, Mapping) else {}
        return cls(
            peak=optional(data.get("peak_memory_bytes"), int),
            method=str(data.get("memory_method", "none")),
            resident=optional(block.get("resident_bytes"), int),
            transient=optional(block.get("transient_bytes"), int),
            transient_method=str(block.get("transient_method", "")),
            reserved=optional(block.get("reserved_bytes"), int),
            devices={str(k): int(v) for k, v in (block.get("devices") or {}).items()},
            reserved_method=str(block.get("reserved_method", "")),
        )


#: The memory of a Measurement built without it (``Measurement.memory``).
NOT_READ: Final = MemoryReading(method="none")
#: What the memory method of a step over ``max_time`` adds: its memory is read from one call, as it is (on a CPU
#: with the profiler running through it, whose buffers are then in the process's high-water mark). Memory does not
#: depend on the machine's load, so a busy machine that pushed the step over its time cap costs it no figure.
ONE_CALL: Final = " (one call: the step is over max_time)"
#: What a graph-mode measurement's memory method adds: the probe calls the step (``After.fn``), graph mode's samples
#: timed the replays of a graph captured from it, whose private pool the allocator's peak of the step leaves out.
OF_AN_EAGER_CALL: Final = (
    " of an eager call of the step, not of the graph's replay (graph mode): the graph's private memory pool is no "
    "part of it"
)


def peak_memory(
    fn: Callable[[], object],
    backend: Backend,
    settings: MeasureSettings,
    device: str,
    rider: Rider | None = None,
    *,
    once: bool = False,
) -> MemoryReading:
    """The memory of a call of ``fn`` under the backend's probe (``MemoryReading``): ``off`` if disabled, and each
    figure None where the probe cannot tell (its method says why: ``unknown: ...``).

    With ``rider``, the work profile rides on the probe's calls where the probe runs them under the profiler (a
    probe with ``settle_calls`` and ``windows``: the CPU's): the settle calls are the rider's, each measured call
    runs in its call range, and ``rider.windows`` gets the probe's profiler windows (``rider.events``: the events
    each recorded). With ``once``, the probe measures one call as it is (a step over ``max_time``): its method says
    so (``ONE_CALL``)."""
    if not settings.memory:
        return MemoryReading()
    # A GPU's figures count every live tensor of the device: an earlier test's garbage goes first. The CPU's (the
    # RSS high-water mark over the call, the allocator's events in it) do not hold what is merely unreachable.
    full = device.split(":", 1)[0] != "cpu"
    if once:
        with torch_threads(settings.threads_for(device)), gc_paused(full=full), backend.track_memory() as probe:
            fn()
            backend.synchronize()
        reading = MemoryReading.of(probe)
        return dataclasses.replace(reading, method=reading.method + ONE_CALL) if reading.peak is not None else reading
    with torch_threads(settings.threads_for(device)), gc_paused(full=full), backend.track_memory() as probe:
        settle = int(getattr(probe, "settle_calls", 0))
        riding = rider if settle else None
        for index in probe.calls():
            if riding is not None and index < settle:
                riding.settle(fn)
                # The measured calls' windows start after it: Python's tracer in them, where its cost fits the budget
                probe.trace_python = riding.python  # type: ignore[attr-defined]  # a probe with settle_calls has it
            else:
                with riding.call_range() if riding is not None else nullcontext():
                    fn()
            backend.synchronize()
    if riding is not None:
        riding.windows = list(getattr(probe, "windows", ()))
        riding.events = list(getattr(probe, "window_events", ()))
    return MemoryReading.of(probe)


@dataclass(frozen=True)
class MemoryChange:
    """Each side's peak in bytes (the largest of its records), ``change`` ``more``/``less``/``same``, and ``kind``:
    what the figure is (``cuda allocator peak``, ``cpu allocator peak above the call's start``)."""

    base_bytes: int
    head_bytes: int
    change: str
    kind: str

    def failing(self, fail_on: Collection[str]) -> list[str]:
        return ["memory"] if self.change == "more" and "memory" in fail_on else []

    def summary(self, fail_on: Collection[str]) -> str | None:
        """``peak memory more: 51 MiB -> 55 MiB (+4 MiB, cuda allocator peak)`` where it changed, else None."""
        if self.change == "same":
            return None
        delta = self.head_bytes - self.base_bytes
        sign = "+" if delta > 0 else "-"
        failing = " (failing on memory)" if self.failing(fail_on) else ""
        return (
            f"peak memory {self.change}: {format_bytes(self.base_bytes)} -> {format_bytes(self.head_bytes)} "
            f"({sign}{format_bytes(abs(delta))}, {self.kind}){failing}"
        )

    def details(self, limit: int | None = None) -> list[str]:
        return []

    def to_dict(self, fail_on: Collection[str] = ()) -> dict[str, Any]:
        return {"base_bytes": self.base_bytes, "head_bytes": self.head_bytes, "change": self.change, "kind": self.kind}


def compare_memory(base: Sequence[MemoryReading], head: Sequence[MemoryReading]) -> MemoryChange | None:
    """Head's peak against base's, None where a side has no gated figure or the sides' figures are of two kinds."""
    sides = []
    for readings in (base, head):
        figures = [f for f in (r.gated for r in readings) if f is not None]
        if not figures:
            return None
        sides.append(figures)
    kinds = {kind for figures in sides for _, kind in figures}
    if len(kinds) != 1:
        return None
    (b_low, b_high), (h_low, h_high) = ((min(n for n, _ in f), max(n for n, _ in f)) for f in sides)
    change = "more" if h_low > b_high else "less" if h_high < b_low else "same"
    return MemoryChange(b_high, h_high, change, kinds.pop())


class _Memory(Reading[MemoryReading]):
    name = "memory"
    header = "peak mem"
    change_key = "memory"

    def after(self, after: After, sensor: object) -> MemoryReading:
        if after.skip and not after.over_time:
            return MemoryReading(method=f"off: {after.skip}")
        if after.skip:
            reading = peak_memory(after.fn, after.backend, after.settings, after.device, once=True)
        else:
            reading = peak_memory(after.fn, after.backend, after.settings, after.device, after.rider)
        if after.settings.mode == "graph" and reading.peak is not None:
            return dataclasses.replace(reading, method=reading.method + OF_AN_EAGER_CALL)
        return reading

    def encode(self, value: MemoryReading | None) -> dict[str, Any]:
        return (value or NOT_READ).to_json()

    def decode(self, data: Mapping[str, Any]) -> MemoryReading:
        return MemoryReading.from_json(data)

    def cell(self, m: Measurement) -> str:
        return m.memory.cell

    def facts(self, m: Measurement) -> list[tuple[str, str]]:
        return [("memory", m.memory.detail)]

    def compare(self, base: Sequence[Measurement], head: Sequence[Measurement]) -> MemoryChange | None:
        return compare_memory([m.memory for m in base], [m.memory for m in head])


#: The memory of a call, read after timing.
MEMORY: Final = _Memory()
