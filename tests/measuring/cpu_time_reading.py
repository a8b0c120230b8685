"""A reading added as a new one lands (issue 33, item 1): the process's CPU time per call over the sampled blocks.

This module is the whole of it: its value and codec, its sensor, its table cell, flag and note, its fact on the
HTML report and its comparison for the gate. ``register_reading(CPU_TIME)`` adds it to every measurement made
inside the block; nothing in the runner, the Measurement, the results table, the HTML report or the gate names it.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_gpuperf.measuring import Around, Measurement, Reading, format_duration, median


@dataclass(frozen=True)
class CpuTime:
    """The process's CPU time per call (user and system, every thread), median over the sampled blocks."""

    per_call: float
    blocks: int


@dataclass
class _Sensor:
    """CPU time read after every block: each block's share is the CPU time since the previous reading."""

    last: float = field(default_factory=time.process_time)
    per_call: list[float] = field(default_factory=list)

    def after_block(self, iterations: int, seconds: float) -> None:
        now = time.process_time()
        self.per_call.append((now - self.last) / iterations)
        self.last = now

    def value(self, samples: int) -> CpuTime | None:
        kept = self.per_call[-samples:] if samples > 0 else []
        return CpuTime(median(kept), len(kept)) if kept else None


@dataclass(frozen=True)
class CpuTimeChange:
    """Each side's median CPU time per call; ``more`` where head's is above twice base's (CPU time is no count:
    the machine's load moves it, so only a large change is called)."""

    base: float
    head: float

    @property
    def more(self) -> bool:
        return self.head > 2 * self.base

    def failing(self, fail_on: Collection[str]) -> list[str]:
        return ["cpu_time"] if self.more and "cpu_time" in fail_on else []

    def summary(self, fail_on: Collection[str]) -> str | None:
        if not self.more:
            return None
        return f"cpu time per call more: {format_duration(self.base)} -> {format_duration(self.head)}"

    def details(self, limit: int | None = None) -> list[str]:
        return []

    def to_dict(self, fail_on: Collection[str]) -> dict[str, Any]:
        return {"base": self.base, "head": self.head, "more": self.more}


class _CpuTime(Reading[CpuTime]):
    name = "cpu_time"
    header = "cpu/call"
    change_key = "cpu_time"

    @contextmanager
    def open(self, around: Around) -> Iterator[_Sensor]:
        yield _Sensor()

    def to_json(self, value: CpuTime) -> dict[str, Any]:
        return {"per_call": value.per_call, "blocks": value.blocks}

    def decode(self, data: Mapping[str, Any]) -> CpuTime | None:
        stored = data.get(self.name)
        return CpuTime(float(stored["per_call"]), int(stored["blocks"])) if isinstance(stored, Mapping) else None

    def cell(self, m: Measurement) -> str | None:
        value = m.reading(self)
        return None if value is None else format_duration(value.per_call)

    def flags(self, m: Measurement) -> list[str]:
        value = m.reading(self)
        return ["cpu above wall"] if value is not None and value.per_call > 1.5 * m.median else []

    def notes(self, measurements: Sequence[Measurement]) -> list[str]:
        read = sum(1 for m in measurements if m.reading(self) is not None)
        return [f"cpu/call: the process's CPU time per call, {read} of {len(measurements)} records"] if read else []

    def facts(self, m: Measurement) -> list[tuple[str, str]]:
        value = m.reading(self)
        return [] if value is None else [("CPU time", f"{format_duration(value.per_call)}/call, {value.blocks} blocks")]

    def compare(self, base: Sequence[Measurement], head: Sequence[Measurement]) -> CpuTimeChange | None:
        sides = [[v.per_call for m in side if (v := m.reading(self)) is not None] for side in (base, head)]
        return CpuTimeChange(median(sides[0]), median(sides[1])) if all(sides) else None


#: The process's CPU time per call.
CPU_TIME: Final = _CpuTime()
