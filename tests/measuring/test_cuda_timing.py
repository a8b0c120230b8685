"""The CUDA backend's timing, on a simulated GPU timeline (``fake_gpu.py``): each bias first, then gone."""

from __future__ import annotations

import pytest

from pytest_gpuperf.measuring import MeasureSettings, ModeUnsupported, Step, measure_on, measure_paired
from pytest_gpuperf.measuring._backends import CudaBackend, block_timer, graph_calls

from .fake_gpu import FakeGpu, step

FAST = MeasureSettings(max_time=0.5, min_time=0.02, warmup_time=0.02, memory=False)


def backend_on(gpu: FakeGpu, *, spin: bool = True) -> CudaBackend:
    torch = gpu.torch()
    if not spin:
        del torch.cuda._sleep  # what the backend did before: nothing queued ahead of the start event
    return CudaBackend(0, torch_module=torch, clock=gpu.clock)


def test_launch_latency_is_outside_the_block_behind_a_lead_and_without_one() -> None:
    # A training step: 30 us of host work (zero_grad, autocast) before ten 100 us kernels. The device needs 1 ms.
    # Timed from a drained stream, the GPU would idle while the host got going (+3.5%): a loop does not pay that.
    gpu = FakeGpu()
    fn = step(gpu, 30e-6, [100e-6] * 10)
    without = backend_on(gpu, spin=False)  # no spin: the block starts after a call still in flight, as in a loop
    assert without.time_block(fn, 1) == pytest.approx(1e-3, rel=1e-3)

    gpu = FakeGpu()
    fn = step(gpu, 30e-6, [100e-6] * 10)
    backend = backend_on(gpu)
    backend.time_block(fn, 1)  # learns the host's launch time (its own lead was a guess)
    learned = backend.short_leads
    after = backend.time_block(fn, 1)
    assert after == pytest.approx(1e-3, rel=1e-6)
    assert backend.last_host == pytest.approx(30e-6 + 10 * 5e-6, rel=0.2)
    assert backend.short_leads == learned  # the lead now covers the launch


def test_a_step_measures_its_device_time_end_to_end() -> None:
    gpu = FakeGpu()
    m = measure_on(
        step(gpu, 30e-6, [100e-6] * 10), backend_on(gpu), FAST, name="train", device="cuda:0", work={}, clock=gpu.clock
    )
    assert m.median == pytest.approx(1e-3, rel=1e-4)
    assert not m.host_bound and m.host_per_call is not None and m.host_per_call < 1e-4


def test_a_host_bound_step_is_flagged_and_sized_by_its_host_time() -> None:
    # 9 us of host time per call for a 2 us kernel: the GPU idles between kernels in a real loop.
    gpu = FakeGpu(launch=9e-6)
    backend = backend_on(gpu)
    m = measure_on(step(gpu, 0.0, [2e-6]), backend, FAST, name="tiny", device="cuda:0", work={}, clock=gpu.clock)
    assert m.host_bound
    assert m.host_per_call == pytest.approx(9e-6, rel=0.05)
    assert m.median == pytest.approx(m.host_per_call, rel=1e-6)  # what a loop pays: the host's time
    assert m.device_per_call == pytest.approx(2e-6, rel=0.01)  # device time with the queue kept full
    # Blocks sized by the host time (about 1 ms of launching), not by the 2 us device time (500x that).
    assert m.iterations * 9e-6 == pytest.approx(1e-3, rel=0.05)


def test_a_step_that_launches_nothing_is_flagged() -> None:
    gpu = FakeGpu()
    with pytest.warns(UserWarning, match="ran no work on cuda:0"):
        m = measure_on(
            lambda: gpu.spend(3e-6), backend_on(gpu), FAST, name="cpu_only", device="cuda:0", work={}, clock=gpu.clock
        )
    assert m.no_device_work


def test_cold_mode_flushes_l2_before_each_call_and_leaves_the_flush_out() -> None:
    gpu = FakeGpu(l2_bytes=50 << 20)
    backend = backend_on(gpu)
    fn = step(gpu, 0.0, [100e-6])
    seconds = backend.time_cold(fn, 4)
    assert seconds == pytest.approx(4 * 100e-6, rel=1e-6)
    assert gpu.log == [f"empty {100 << 20} on cuda:0"]  # twice the L2, allocated once
    names = [name for name, _, _ in gpu.kernels if name != "sleep"]
    assert names == ["flush", "k0"] * 4


def test_graph_mode_replays_one_launch_and_refuses_what_cannot_be_captured() -> None:
    gpu = FakeGpu()
    fn = step(gpu, 30e-6, [5e-6] * 20)  # launch-bound when warm: 130 us of host for 100 us of device
    warm = measure_on(fn, backend_on(gpu), FAST, name="warm", device="cuda:0", work={}, clock=gpu.clock)
    assert warm.host_bound
    graph_settings = FAST.with_values({"mode": "graph"})
    graph = measure_on(fn, backend_on(gpu), graph_settings, name="graph", device="cuda:0", work={}, clock=gpu.clock)
    assert graph.mode == "graph" and not graph.host_bound
    assert graph.median == pytest.approx(100e-6, rel=1e-3)

    def syncs() -> None:
        if gpu.capturing:
            raise RuntimeError("operation not permitted when stream is capturing")

    with pytest.raises(ModeUnsupported, match=r"cannot be captured in a CUDA graph on cuda:0: RuntimeError: operation"):
        block_timer(backend_on(gpu), syncs, "graph")


def test_paired_rounds_size_a_fast_step_beside_a_slow_one() -> None:
    # An n=4096 bf16 matmul (0.2 ms) beside the n=16384 peak (12 ms): one call per block would time it alone.
    gpu = FakeGpu()
    steps = {"peak": Step(step(gpu, 0.0, [12e-3]), {}), "n=4096": Step(step(gpu, 0.0, [0.2e-3]), {})}
    backend = backend_on(gpu)
    settings = MeasureSettings(max_time=2.0, min_time=0.05, warmup_time=0.05, min_samples=10, memory=False)
    paired = measure_paired(steps, backend, settings, device="cpu")
    assert paired.measurements["n=4096"].median == pytest.approx(0.2e-3, rel=1e-3)
    assert paired.measurements["peak"].median == pytest.approx(12e-3, rel=1e-3)


def test_a_step_that_synchronizes_gets_no_lead_and_no_host_time() -> None:
    """A step that waits for the device (``.item()``, a pageable copy) would wait behind the spin too."""
    gpu = FakeGpu()

    def syncs() -> None:
        gpu.kernel("k", 100e-6)
        gpu.drain()  # the host waits for the device

    backend = backend_on(gpu)
    m = measure_on(syncs, backend, FAST, name="syncs", device="cuda:0", work={}, clock=gpu.clock)
    assert m.host_per_call is None and not m.host_bound  # its host time is the loop's, not its own
    assert backend.short_leads <= 3  # found out within the first blocks, then no more spinning
    spins = [k for k in gpu.kernels if k[0] == "sleep"]
    assert len(spins) <= 4
    assert 100e-6 <= m.median <= 106e-6  # each call's own launch gap, as in any loop of it


def test_each_step_has_a_lead_of_its_own_in_paired_rounds() -> None:
    """Steps of different host cost alternate: a lead sized for one must not be used for the other."""
    gpu = FakeGpu()
    steps = {"heavy host": Step(step(gpu, 400e-6, [1e-3]), {}), "light host": Step(step(gpu, 0.0, [1e-3]), {})}
    backend = backend_on(gpu)
    settings = MeasureSettings(max_time=1.0, min_time=0.05, warmup_time=0.05, min_samples=10, memory=False)
    paired = measure_paired(steps, backend, settings, device="cpu")
    for name in steps:
        assert paired.measurements[name].median == pytest.approx(1e-3, rel=1e-4), name


def test_graph_mode_spreads_the_graph_launch_over_enough_calls() -> None:
    """Every launch costs the device a gap (1.6 us here); a graph of one 50 us call would carry it whole (+3.2%)."""
    gpu = FakeGpu(device_gap=1.6e-6)
    fn = step(gpu, 0.0, [50e-6])
    warm = measure_on(fn, backend_on(gpu), FAST, name="warm", device="cuda:0", work={}, clock=gpu.clock)
    assert warm.median == pytest.approx(51.6e-6, rel=1e-3)  # what a stream of such launches costs
    one_call = backend_on(gpu)
    replay = one_call.capture(fn)
    assert one_call.time_block(replay, 10) / 10 == pytest.approx(51.6e-6, rel=1e-3)
    graph_settings = FAST.with_values({"mode": "graph"})
    graph = measure_on(fn, backend_on(gpu), graph_settings, name="graph", device="cuda:0", work={}, clock=gpu.clock)
    assert graph.median == pytest.approx(50e-6, rel=0.01)  # 4 calls a graph: 50.4 us
    assert graph_calls(50e-6) == 4 and graph_calls(1e-6) == 64 and graph_calls(1e-3) == 1
