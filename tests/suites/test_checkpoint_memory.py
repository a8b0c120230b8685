"""Which memory figure the checkpointing suite judges its saving on, per device (issue 21, item 8)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_gpuperf.measuring import MEMORY, Measurement, measure
from pytest_gpuperf.measuring._memory import MemoryReading
from suites.test_checkpoint import HIGH_WATER, TRANSIENT, _judged_memory

MiB = 1 << 20


def _measurement(**memory: Any) -> Measurement:
    """A measurement with this memory reading (``MemoryReading``'s fields)."""
    m = measure(lambda: None, device="cpu", max_time=0.01, min_time=0.001, warmup_time=0.001, memory="off")
    return m.with_reading(MEMORY, MemoryReading(**memory))


def test_cuda_judges_the_high_water_mark_with_the_resident_state_in_it() -> None:
    m = _measurement(
        peak=51 * MiB,
        method="torch.cuda.max_memory_allocated",
        resident=25 * MiB,
        transient=26 * MiB,
    )
    assert _judged_memory(m) == (51 * MiB, HIGH_WATER)


def test_a_cpu_judges_the_transient_part_never_the_processs_rss() -> None:
    m = _measurement(
        peak=450 * MiB,
        method="process RSS high-water mark (VmHWM)",
        transient=20 * MiB,
        transient_method="torch.profiler CPU allocator events",
    )
    assert _judged_memory(m) == (20 * MiB, TRANSIENT)
    unknown = m.with_reading(
        MEMORY, dataclasses.replace(m.memory, transient=None, transient_method="unknown: calls disagree")
    )
    assert _judged_memory(unknown) == (None, "unknown: calls disagree")


def test_mps_and_off_judge_nothing() -> None:
    mps = _measurement(method="unknown: torch.mps has no peak statistic")
    assert _judged_memory(mps) == (None, "unknown: torch.mps has no peak statistic")
    assert _judged_memory(_measurement(method="off")) == (None, "off")
