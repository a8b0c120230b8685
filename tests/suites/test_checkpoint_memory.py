"""Which memory figure the checkpointing suite judges its saving on, per device (issue 21, item 8)."""

from __future__ import annotations

import dataclasses

from pytest_gpuperf.measuring import Measurement, measure
from suites.test_checkpoint import HIGH_WATER, TRANSIENT, _judged_memory

MiB = 1 << 20


def _measurement(**memory: object) -> Measurement:
    m = measure(lambda: None, device="cpu", max_time=0.01, min_time=0.001, warmup_time=0.001, memory="off")
    return dataclasses.replace(m, **memory)  # type: ignore[arg-type]


def test_cuda_judges_the_high_water_mark_with_the_resident_state_in_it() -> None:
    m = _measurement(
        peak_memory=51 * MiB,
        memory_method="torch.cuda.max_memory_allocated",
        memory_resident=25 * MiB,
        memory_transient=26 * MiB,
    )
    assert _judged_memory(m) == (51 * MiB, HIGH_WATER)


def test_a_cpu_judges_the_transient_part_never_the_processs_rss() -> None:
    m = _measurement(
        peak_memory=450 * MiB,
        memory_method="process RSS high-water mark (VmHWM)",
        memory_transient=20 * MiB,
        transient_method="torch.profiler CPU allocator events",
    )
    assert _judged_memory(m) == (20 * MiB, TRANSIENT)
    unknown = dataclasses.replace(m, memory_transient=None, transient_method="unknown: calls disagree")
    assert _judged_memory(unknown) == (None, "unknown: calls disagree")


def test_mps_and_off_judge_nothing() -> None:
    mps = _measurement(memory_method="unknown: torch.mps has no peak statistic")
    assert _judged_memory(mps) == (None, "unknown: torch.mps has no peak statistic")
    assert _judged_memory(_measurement(memory_method="off")) == (None, "off")
