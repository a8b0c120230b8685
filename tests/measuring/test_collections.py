"""What a measurement spends on Python's garbage collector (issue 24 item 7).

A full collection walks every object the process holds: with torch and a suite loaded, 172,796 objects, 0.05 to
0.13 s on the development machine. A measurement made two (before its samples and before its memory probe), more
than the whole sampling of a fast step: 4 of pint's benchmarks spent 2.5 s of a 8.8 s session in them. The
samples need no collection, only the collector kept off; the memory probe on a GPU counts every live byte of the
device, so the garbage of earlier tests goes first there.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

from pytest_gpuperf.measuring import MeasureSettings, measure
from pytest_gpuperf.measuring._backends import CpuBackend
from pytest_gpuperf.measuring._calls import gc_paused
from pytest_gpuperf.measuring._memory import peak_memory

FAST: dict[str, Any] = {"min_time": 0.005, "max_time": 0.2, "warmup_time": 0.01, "profile": "off"}


@pytest.fixture
def collections(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The generation of every collection asked for through ``gc.collect`` (2: a full one)."""
    asked: list[int] = []
    collect: Callable[..., int] = gc.collect

    def spy(generation: int = 2) -> int:
        asked.append(generation)
        return collect(generation)

    monkeypatch.setattr(gc, "collect", spy)
    return asked


def test_a_measurement_on_a_cpu_makes_no_full_collection(collections: list[int]) -> None:
    """Main made two full collections per measurement (before the samples and before the memory probe)."""
    m = measure(lambda: sum(range(100)), **FAST)
    assert m.samples and m.memory.method  # sampled, and the memory probe ran
    assert collections and 2 not in collections


def test_the_collector_is_off_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused(full=True):
            assert not gc.isenabled()
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


def test_the_memory_probe_collects_fully_where_its_figures_count_every_live_byte(collections: list[int]) -> None:
    """On a GPU the high-water mark and the resident level count every live tensor of the device: an earlier test's
    garbage would be counted in them. The CPU's figures (RSS, the allocator's events during the call) are not."""
    peak_memory(lambda: None, CpuBackend(), MeasureSettings(), "cuda:0")
    assert collections == [2]
    collections.clear()
    peak_memory(lambda: None, CpuBackend(), MeasureSettings(), "cpu")
    assert 2 not in collections
