"""Tests that need a real GPU: they run where one exists and skip with the reason elsewhere."""

from __future__ import annotations

import time

import pytest
import torch

from pytest_gpuperf.measuring._backends import CudaBackend, MpsBackend


def gpu_sleep(cycles: int) -> None:
    torch.cuda._sleep(cycles)  # type: ignore[no-untyped-call]


@pytest.mark.cuda
def test_cuda_events_time_device_work_not_host_enqueue() -> None:
    """torch.cuda._sleep returns to the host at once; only a synchronized event pair sees the GPU's time."""
    backend = CudaBackend(0)
    cycles = 50_000_000  # tens of ms on any GPU clocked at 1-2 GHz
    backend.time_block(lambda: gpu_sleep(cycles), 1)  # warm up the kernel
    torch.cuda.synchronize()
    host_start = time.perf_counter()
    gpu_sleep(cycles)
    host_enqueue = time.perf_counter() - host_start
    torch.cuda.synchronize()
    device = backend.time_block(lambda: gpu_sleep(cycles), 1)
    assert device > 10 * host_enqueue
    two = backend.time_block(lambda: gpu_sleep(cycles), 2)
    assert two == pytest.approx(2 * device, rel=0.2)


@pytest.mark.cuda
def test_cuda_peak_memory_of_a_known_allocation() -> None:
    backend = CudaBackend(0)
    n = 64 * 2**20  # 256 MiB of fp32

    def step() -> None:
        x = torch.empty(n, device="cuda:0")
        y = x + 1
        del x, y

    resident = torch.empty(n, device="cuda:0")  # 256 MiB resident before the call: in the high-water mark
    with backend.track_memory() as probe:
        step()
    assert probe.peak_bytes is not None and probe.transient_bytes is not None and probe.resident_bytes is not None
    assert 2 * 4 * n <= probe.transient_bytes < 2 * 4 * n + 16 * 2**20
    assert probe.resident_bytes >= resident.nbytes
    assert probe.peak_bytes == probe.resident_bytes + probe.transient_bytes
    assert probe.reserved_bytes is not None and probe.reserved_bytes >= probe.peak_bytes


def _small_cnn_memory(zero_grad_first: bool) -> tuple[int, int]:
    """(high-water mark, transient) of a small CNN's SGD training step with ``zero_grad`` first or last."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 10),
    ).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 3, 32, 32, device="cuda"), torch.randint(0, 10, (64,), device="cuda")

    def step() -> None:
        if zero_grad_first:
            optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(torch.nn.functional.cross_entropy(model(x), y))
        optimizer.step()
        if not zero_grad_first:
            optimizer.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    with CudaBackend(0).track_memory() as probe:
        step()
    assert probe.peak_bytes is not None and probe.transient_bytes is not None
    return probe.peak_bytes, probe.transient_bytes


@pytest.mark.cuda
def test_a_training_steps_high_water_mark_does_not_depend_on_where_zero_grad_is() -> None:
    """Issue 21's small CNN: the growth above a call's start moves with zero_grad(); the high-water mark does not."""
    first, last = _small_cnn_memory(True), _small_cnn_memory(False)
    print(f"zero_grad first: peak {first[0]} B, transient {first[1]} B; last: peak {last[0]} B, transient {last[1]} B")
    assert abs(first[0] - last[0]) <= 2 * 2**20
    assert first[1] < last[1]  # the gradients are resident at the start when zero_grad() comes first


@pytest.mark.mps
def test_mps_times_device_work() -> None:
    backend = MpsBackend()
    a = torch.randn(2048, 2048, device="mps")
    one = backend.time_block(lambda: a @ a, 4)
    two = backend.time_block(lambda: a @ a, 8)
    assert two == pytest.approx(2 * one, rel=0.3)


def spin_host(seconds: float) -> None:
    """Host work that launches nothing (Python, zero_grad's bookkeeping), as busy time."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.cuda
def test_host_work_before_the_first_kernel_is_not_in_the_block() -> None:
    """50 us of host work before a ~1 ms kernel: the block must read the kernel's time, not kernel + 50 us."""
    backend = CudaBackend(0)
    cycles = 2_000_000  # about 1 ms at 2 GHz
    backend.time_block(lambda: gpu_sleep(cycles), 1)
    alone = min(backend.time_block(lambda: gpu_sleep(cycles), 1) for _ in range(5))

    def step() -> None:
        spin_host(50e-6)
        gpu_sleep(cycles)

    backend.time_block(step, 1)  # learns the host's launch time
    with_host = min(backend.time_block(step, 1) for _ in range(5))
    assert with_host == pytest.approx(alone, rel=0.01)
    assert backend.last_host is not None and backend.last_host >= 50e-6


@pytest.mark.cuda
def test_modes_on_cuda_graph_replays_and_cold_flushes() -> None:
    from pytest_gpuperf import ModeUnsupported, measure

    a = torch.randn(2048, 2048, device="cuda:0")
    warm = measure(lambda: a @ a, device="cuda", memory=False)
    graph = measure(lambda: a @ a, device="cuda", mode="graph", memory=False)
    cold = measure(lambda: a @ a, device="cuda", mode="cold", memory=False, max_time=1)
    assert graph.mode == "graph" and cold.mode == "cold"
    assert graph.median == pytest.approx(warm.median, rel=0.05)
    assert cold.median > 0.9 * warm.median
    with pytest.raises(ModeUnsupported, match="cannot be captured in a CUDA graph"):
        measure(lambda: (a @ a).sum().item(), device="cuda", mode="graph", memory=False)


@pytest.mark.cuda
def test_a_launch_bound_step_and_a_step_left_on_the_cpu_are_flagged() -> None:
    from pytest_gpuperf import NoDeviceWorkWarning, measure

    tiny = torch.zeros(1, device="cuda:0")
    m = measure(lambda: tiny.add_(1.0), device="cuda", memory=False)
    assert m.host_bound and m.host_per_call is not None
    on_cpu = torch.zeros(16)
    with pytest.warns(NoDeviceWorkWarning, match="ran no work on cuda:0"):
        measure(lambda: on_cpu.add_(1.0), device="cuda", memory=False)


@pytest.mark.cuda
def test_a_host_bound_step_is_timed_as_a_loop_of_it_pays() -> None:
    """2 ms of host work before a ~1 ms kernel: a loop pays the host's 2 ms; the device's time is kept beside."""
    from pytest_gpuperf import measure

    def step() -> None:
        spin_host(2e-3)
        gpu_sleep(2_000_000)

    m = measure(step, device="cuda", memory=False, max_time=1)
    assert m.host_bound and m.median >= 2e-3
    assert m.device_per_call is not None and m.device_per_call < 0.8 * m.median


@pytest.mark.cuda
def test_per_call_samples_are_call_to_result() -> None:
    """200 us of host work before a ~100 us kernel: a request takes at least 300 us from call to result."""
    from pytest_gpuperf import measure

    def request() -> None:
        spin_host(200e-6)
        gpu_sleep(200_000)

    m = measure(request, device="cuda", memory=False, max_time=1, per_call=True)
    assert m.latency and m.single_calls
    assert m.percentile(50) >= 280e-6
