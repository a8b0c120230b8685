"""Peak memory is the high-water mark of a call (issue 21, item 8): CUDA on a stand-in, the CPU on real torch.

Before: the figure was the growth above the level at the call's start. The issue's small
CNN, in miniature on the stand-in (``fake_cuda_memory.SmallCnnStep``), read 26.0 MiB with
``zero_grad()`` first and 34.1 MiB with it last; its high-water mark is 51.0 MiB both ways.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pytest_gpuperf.measuring import AllCudaBackend, Measurement, MeasureSettings, measure_on
from pytest_gpuperf.measuring._backends import CpuBackend, CudaBackend
from pytest_gpuperf.measuring._cpu_memory import RSS_METHOD, TRANSIENT_METHOD, AllocatorProbe, RssHighWater
from pytest_gpuperf.measuring._memory import MEMORY, MemoryReading, peak_memory

from .fake_cuda_memory import FakeCudaMemory, MiB, SmallCnnStep
from .fake_gpu import FakeGpu

FAST = MeasureSettings(max_time=0.3, min_time=0.02, warmup_time=0.02)


def _cuda(memory: FakeCudaMemory) -> tuple[FakeGpu, CudaBackend]:
    gpu = FakeGpu()
    return gpu, CudaBackend(0, torch_module=memory.install(gpu.torch()), clock=gpu.clock)


def _cnn_on_the_stand_in() -> tuple[FakeGpu, CudaBackend, Callable[[], None]]:
    """The stand-in GPU, its backend, and a call of the small CNN training step (51 MiB peak) with 1 ms of kernel."""
    memory = FakeCudaMemory()
    gpu, backend = _cuda(memory)
    step = SmallCnnStep(memory, zero_grad_first=True)

    def call() -> None:
        gpu.kernel("step", 1e-3)
        step()

    return gpu, backend, call


def _mib(n: int | None) -> float:
    assert n is not None
    return round(n / MiB, 1)


@pytest.mark.parametrize(("zero_grad_first", "transient", "resident"), [(True, 26.0, 25.0), (False, 34.1, 16.9)])
def test_the_small_cnn_peaks_at_51_mib_wherever_zero_grad_is(
    zero_grad_first: bool, transient: float, resident: float
) -> None:
    memory = FakeCudaMemory()
    _, backend = _cuda(memory)
    step = SmallCnnStep(memory, zero_grad_first=zero_grad_first)
    for _ in range(3):  # the timing loop's calls
        step()
    reading = peak_memory(step, backend, MeasureSettings(), "cuda:0")
    # On main this read 26.0 and 34.1 MiB as the peak: the growth, now named the transient.
    assert _mib(reading.peak) == 51.0
    assert _mib(reading.transient) == transient
    assert _mib(reading.resident) == resident
    assert reading.method == "torch.cuda.max_memory_allocated"
    assert reading.reserved == 52 * MiB  # segments of 2 MiB: what out of memory depends on
    assert reading.devices == {}
    assert memory.log == ["reset 0"]


def test_a_cuda_measurement_carries_every_figure_to_the_table_and_the_json() -> None:
    gpu, backend, call = _cnn_on_the_stand_in()
    m = measure_on(call, backend, FAST, name="cnn", device="cuda:0", work={}, clock=gpu.clock)
    assert _mib(m.memory.peak) == 51.0 and _mib(m.memory.transient) == 26.0 and _mib(m.memory.resident) == 25.0
    assert m.memory.cell == "51 MiB"
    assert "peak 51 MiB (resident 25 MiB + transient 26 MiB)" in m.describe()
    stored = json.loads(json.dumps(m.to_dict()))
    assert stored["peak_memory_bytes"] == m.memory.peak
    assert stored["memory"]["transient_bytes"] == m.memory.transient
    again = Measurement.from_dict(stored)
    assert again.memory == m.memory


def test_a_data_parallel_step_records_each_devices_high_water_mark() -> None:
    memory = FakeCudaMemory(count=3)
    memory.alloc(5 * MiB, device=2)  # another test's tensor on cuda:2: the step never touches it
    _, backend = _cuda(memory)
    model = SmallCnnStep(memory, zero_grad_first=True)  # on cuda:0, scattering its batch to cuda:1

    def step() -> None:
        model()
        memory.alloc(20 * MiB, device=1)  # the replica's activations
        memory.free(20 * MiB, device=1)

    reading = peak_memory(step, backend, MeasureSettings(), "cuda:0")
    assert reading.devices == {"cuda:0": model.model_state + model.gradients + model.activations, "cuda:1": 20 * MiB}
    assert _mib(reading.peak) == 51.0
    assert reading.method == "torch.cuda.max_memory_allocated (the largest of 2 devices: cuda:0)"
    assert sorted(memory.log) == ["reset 0", "reset 1", "reset 2"]


def test_the_benchmark_fixtures_backend_reports_the_largest_device_with_each() -> None:
    memory = FakeCudaMemory(count=2)
    memory.alloc(10 * MiB, device=1)  # resident weights on cuda:1
    log: list[str] = []
    fake = memory.install(SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda index: log.append(f"sync {index}"))))
    backend = AllCudaBackend((0, 1), fake)
    with backend.track_memory() as probe:
        memory.alloc(3 * MiB, device=0)
        memory.alloc(4 * MiB, device=1)
    assert probe.peak_bytes == 14 * MiB and probe.resident_bytes == 10 * MiB and probe.transient_bytes == 4 * MiB
    assert probe.devices == {"cuda:0": 3 * MiB, "cuda:1": 14 * MiB}


def test_in_graph_mode_the_memory_method_says_the_figure_is_an_eager_calls() -> None:
    """F12: graph mode times the graph's replays, and the memory probe runs the step eagerly: the figure is the eager
    call's, without the graph's private pool. The method says so; the figure is still the allocator's peak, gated
    against another graph-mode record's."""
    gpu, backend, call = _cnn_on_the_stand_in()
    graph = FAST.with_values({"mode": "graph", "profile": "off"})
    m = measure_on(call, backend, graph, name="cnn", device="cuda:0", work={}, clock=gpu.clock)
    assert m.mode == "graph" and _mib(m.memory.peak) == 51.0
    assert m.memory.method == (
        "torch.cuda.max_memory_allocated of an eager call of the step, not of the graph's replay (graph mode): "
        "the graph's private memory pool is no part of it"
    )
    assert m.memory.gated == (m.memory.peak, "cuda allocator peak")
    assert Measurement.from_dict(json.loads(json.dumps(m.to_dict()))).memory == m.memory
    warm = measure_on(
        call, backend, FAST.with_values({"profile": "off"}), name="cnn", device="cuda:0", work={}, clock=gpu.clock
    )
    assert warm.memory.method == "torch.cuda.max_memory_allocated"


@pytest.mark.parametrize("left", [0, 300 * MiB])
def test_the_reserved_figure_is_the_calls_own_not_the_cache_earlier_tests_left(left: int) -> None:
    """The reserved high-water mark after a reset is at least the whole cache at the call's start, and nothing empties
    it between tests: an earlier test's freed 300 MiB read as this step's reserved memory (F9). The probe empties
    the cache first, and says so: the figure is then what this call's blocks and the resident ones need."""
    memory = FakeCudaMemory()
    _, backend = _cuda(memory)
    memory.alloc(left)  # an earlier test's tensors, freed: their segments stay in the cache
    memory.free(left)
    step = SmallCnnStep(memory, zero_grad_first=True)
    for _ in range(3):
        step()
    reading = peak_memory(step, backend, MeasureSettings(), "cuda:0")
    assert reading.reserved == 52 * MiB  # on main: 300 MiB after the earlier test
    assert reading.reserved_method == "torch.cuda.max_memory_reserved after torch.cuda.empty_cache()"
    assert memory.empties == 1
    assert ", reserved 52 MiB with the allocator's cache emptied first (" in reading.detail
    assert MemoryReading.from_json(json.loads(json.dumps(reading.to_json()))) == reading


def test_the_benchmark_fixtures_backend_empties_the_cache_before_its_reserved_figure() -> None:
    memory = FakeCudaMemory(count=2)
    memory.alloc(100 * MiB, device=1)  # an earlier test's, freed
    memory.free(100 * MiB, device=1)
    fake = memory.install(SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda index: None)))
    with AllCudaBackend((0, 1), fake).track_memory() as probe:
        memory.alloc(3 * MiB, device=1)
    assert probe.peak_bytes == 3 * MiB and probe.reserved_bytes == 4 * MiB  # on main: 100 MiB


def test_a_reserved_figure_of_a_file_written_before_is_not_said_to_follow_an_emptied_cache() -> None:
    old = MemoryReading(peak=51 * MiB, method="torch.cuda.max_memory_allocated", reserved=300 * MiB)
    data = old.to_json()
    del data["memory"]["reserved_method"]
    again = MemoryReading.from_json(data)
    assert again == old and again.reserved_method == ""
    assert again.detail == "peak 51 MiB, reserved 300 MiB (torch.cuda.max_memory_allocated)"


def _rss() -> int:
    match = re.search(r"^VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    assert match is not None
    return int(match.group(1)) * 1024


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="no /proc/self/clear_refs (Linux only)")
def test_the_cpu_figure_is_the_processs_high_water_mark_with_the_allocators_transient() -> None:
    weights = torch.ones(32 * MiB // 4)  # 32 MiB resident before the call, as a model's weights are
    n = 64 * MiB // 4

    def step() -> None:
        scratch = torch.ones(n)  # 64 MiB freed by the end of the call: larger than glibc's mmap threshold
        del scratch

    rss = _rss()
    reading = peak_memory(step, CpuBackend(), MeasureSettings(), "cpu")
    assert reading.method == RSS_METHOD and reading.transient_method == TRANSIENT_METHOD
    assert reading.peak is not None and reading.transient is not None
    assert 64 * MiB <= reading.transient < 65 * MiB  # the profiler sees the call's own allocations only
    # The absolute figure covers what was resident before the call (the weights) and the call's own peak.
    assert reading.peak >= rss + 64 * MiB - 4 * MiB >= weights.nbytes + reading.transient
    m = _with_memory(reading)
    assert re.fullmatch(r"\+64 MiB, RSS \d+(\.\d+)? [MG]iB", m.memory.cell)
    assert m.memory.text.startswith("transient 64 MiB (torch's CPU allocator), process RSS high-water mark ")


def test_where_the_rss_cannot_be_reset_only_the_transient_is_given(tmp_path: Path) -> None:
    probe = AllocatorProbe(RssHighWater(clear_refs=str(tmp_path / "absent" / "clear_refs")))
    for _ in probe.calls():
        torch.ones(MiB // 4)
    probe._conclude()
    assert probe.peak_bytes is None and probe.reason is not None
    assert probe.reason.startswith("unknown: the process's RSS high-water mark cannot be reset")
    assert probe.transient_bytes is not None and MiB <= probe.transient_bytes < 2 * MiB
    m = _with_memory(MemoryReading.of(probe))
    assert m.memory.cell == "+1 MiB"
    assert m.memory.text == "transient 1 MiB (no high-water mark known)"


def test_nothing_on_mps_is_called_a_peak() -> None:
    m = _with_memory(MemoryReading(method="unknown: torch.mps has no peak statistic"))
    assert m.memory.cell == "unknown" and m.memory.text == ""
    assert "peak" not in m.describe()


def _with_memory(reading: MemoryReading) -> Measurement:
    """A CPU measurement of one sample with this memory reading, through its file."""
    from pytest_gpuperf.measuring import measure

    m = measure(lambda: None, device="cpu", max_time=0.01, min_time=0.001, warmup_time=0.001, memory="off")
    return Measurement.from_dict(m.with_reading(MEMORY, reading).to_dict())
