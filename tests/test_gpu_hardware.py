"""Tests that need a real GPU: they run where one exists and skip with the reason elsewhere."""

from __future__ import annotations

import time

import pytest
import torch

from pytest_gpuperf.measuring import CudaBackend, MpsBackend


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

    with backend.track_memory() as probe:
        step()
    assert probe.peak_bytes is not None
    assert 2 * 4 * n <= probe.peak_bytes < 2 * 4 * n + 16 * 2**20


@pytest.mark.mps
def test_mps_times_device_work() -> None:
    backend = MpsBackend()
    a = torch.randn(2048, 2048, device="mps")
    one = backend.time_block(lambda: a @ a, 4)
    two = backend.time_block(lambda: a @ a, 8)
    assert two == pytest.approx(2 * one, rel=0.3)
