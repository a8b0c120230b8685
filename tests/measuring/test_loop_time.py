"""Issue 21 on the stand-in GPU (``fake_gpu.py``): a step's time is what the user's loop pays, latency is call to
result, the lead is sized at the clock it runs at, nothing is kept alive, graphs are captured on their device."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

import pytest

from pytest_gpuperf.measuring import Measurement, MeasureSettings, Step, measure_on, measure_paired
from pytest_gpuperf.measuring._backends import CudaBackend, block_timer

from .fake_gpu import FakeGpu, loader_step, plain_loop, step

FAST = MeasureSettings(max_time=0.5, min_time=0.02, warmup_time=0.02, memory=False)
ROUNDS = MeasureSettings(max_time=3.0, min_time=0.05, warmup_time=0.05, min_samples=10, memory=False)


def backend_on(gpu: FakeGpu, index: int = 0) -> CudaBackend:
    return CudaBackend(index, torch_module=gpu.torch(), clock=gpu.clock)


def measured(fn: Callable[[], object], gpu: FakeGpu, settings: MeasureSettings = FAST) -> Measurement:
    return measure_on(fn, backend_on(gpu), settings, name="step", device="cuda:0", work={}, clock=gpu.clock)


# ---------------------------------------------------------------- item 1: the loop's time


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "pageable"])
def test_a_dataloader_step_is_timed_as_a_loop_of_it_runs(pinned: bool) -> None:
    """10 ms of loading, a 1 ms copy, a 3 ms step: a loop pays 10.10 ms pinned, 11.10 ms pageable (the plugin
    read 4.00 ms, the device time alone, and 14.04 ms, one call's wall time with its device tail)."""
    gpu = FakeGpu()
    loop = plain_loop(gpu, loader_step(gpu, pinned=pinned))
    assert loop == pytest.approx(10.10e-3 if pinned else 11.10e-3, rel=1e-3)
    gpu = FakeGpu()
    m = measured(loader_step(gpu, pinned=pinned), gpu)
    assert m.median == pytest.approx(loop, rel=0.01)


def test_a_host_bound_step_keeps_its_device_and_host_times_and_is_flagged() -> None:
    gpu = FakeGpu()
    m = measured(loader_step(gpu, pinned=True), gpu)
    assert m.host_bound and not m.no_device_work
    assert m.device_per_call == pytest.approx(4e-3, rel=1e-3)  # the copy and the step, the queue kept full
    assert m.host_per_call == pytest.approx(10.1e-3, rel=1e-3)
    assert m.median == pytest.approx(m.host_per_call, rel=1e-6)


def test_a_device_bound_step_is_its_device_time_and_not_flagged() -> None:
    gpu = FakeGpu()
    m = measured(step(gpu, 30e-6, [100e-6] * 10), gpu)
    assert m.median == pytest.approx(1e-3, rel=1e-4) and m.device_per_call == pytest.approx(1e-3, rel=1e-4)
    assert not m.host_bound


def test_the_pinned_against_pageable_ratio_of_paired_rounds_is_the_loops() -> None:
    """The DataLoader suite's claim: pinned's samples/s over pageable's, 1.10 in a plain loop (3.51 before)."""
    gpu = FakeGpu()
    truth = plain_loop(gpu, loader_step(gpu, pinned=False)) / plain_loop(gpu, loader_step(gpu, pinned=True))
    assert truth == pytest.approx(1.10, abs=0.01)
    gpu = FakeGpu()
    steps = {
        "pinned": Step(loader_step(gpu, pinned=True), {"samples": 128.0}),
        "pageable": Step(loader_step(gpu, pinned=False), {"samples": 128.0}),
    }
    rounds = measure_paired(steps, backend_on(gpu), ROUNDS, device="cpu")
    assert rounds.throughput_ratio("pinned", "pageable", "samples").value == pytest.approx(truth, rel=0.02)


def test_a_step_that_synchronizes_is_timed_in_steady_state() -> None:
    """A step that waits for the device at its start and then queues 50 ms: a loop pays 50 ms a call (each call
    waits for the last one's work), which one call timed alone on an idle device would miss."""
    gpu = FakeGpu()

    def waits_then_queues() -> None:
        gpu.drain()
        gpu.kernel("copy", 1e-3)
        gpu.drain()
        gpu.kernel("big", 50e-3)

    loop = plain_loop(gpu, waits_then_queues, calls=200)
    gpu = FakeGpu()
    m = measured(waits_then_queues, gpu)
    assert m.median == pytest.approx(loop, rel=0.01)
    assert m.host_per_call is None and m.device_per_call is None and not m.host_bound


# ---------------------------------------------------------------- item 2: latency is call to result


def test_per_call_samples_are_call_to_result() -> None:
    """50 kernels of 2 us, each launched in 10 us: a request takes 502 us from call to result (read: 100 us)."""
    gpu = FakeGpu(launch=10e-6)
    settings = FAST.with_values({"per_call": True})
    m = measured(step(gpu, 0.0, [2e-6] * 50), gpu, settings)
    assert m.single_calls and m.percentiles is not None
    assert m.percentiles[50] == pytest.approx(502e-6, rel=0.02)
    assert m.percentiles[99] == pytest.approx(502e-6, rel=0.02)


# ---------------------------------------------------------------- item 3: the lead at the clock it runs at


def test_a_lead_calibrated_at_the_idle_clock_is_resized_at_the_clock_it_runs_at() -> None:
    """Calibrated at 345 MHz, spun at 1980: every lead 5.7 times too short, and a training-like step read +4.9%."""
    gpu = FakeGpu(idle_until=10e-3)
    fn = step(gpu, 100e-6, [120e-6] * 10)
    m = measured(fn, gpu)
    assert m.median == pytest.approx(1.2e-3, rel=0.005)


def test_a_block_is_flagged_exactly_when_its_lead_ended_before_the_host_launched_it() -> None:
    gpu = FakeGpu(idle_until=25e-3)
    backend = backend_on(gpu)
    train = step(gpu, 100e-6, [100e-6] * 10)
    launched: list[float] = []

    def fn() -> None:
        train()
        launched.append(gpu.host)

    truth, flagged = [], []
    for block in range(12):
        if block == 6:
            assert gpu.host < gpu.idle_until
            gpu.spend(20e-3)  # the clock ramps up between blocks 5 and 6
        before = len(gpu.kernels)
        backend.time_block(fn, 1 + block % 2)
        spin = next(k for k in gpu.kernels[before:] if k[0] == "sleep")
        truth.append(spin[2] < launched[-1])  # the spin ended before the host had launched the block
        flagged.append(backend.last_short)
    assert flagged == truth
    assert truth[0] and truth[6] and not any(truth[7:])  # the first guess, the ramp; then the lead covers


def test_a_host_bound_block_is_not_flagged_for_a_short_lead() -> None:
    """150 ms of loading: the lead is capped at 0.1 s and ends before the host has launched the block, but the
    block's time is the host's, which idle device time cannot raise."""
    gpu = FakeGpu()
    loop = plain_loop(gpu, loader_step(gpu, pinned=True, load=150e-3), calls=20)
    gpu = FakeGpu()
    backend = backend_on(gpu)
    m = measure_on(
        loader_step(gpu, pinned=True, load=150e-3), backend, FAST, name="l", device="cuda:0", work={}, clock=gpu.clock
    )
    assert backend.short_leads > 0 and m.short_leads == 0
    assert m.host_bound and m.median == pytest.approx(loop, rel=0.01)


# ---------------------------------------------------------------- item 4: nothing kept alive


class Build:
    """A stand-in for a model with its tensors, counted while alive."""


def test_no_build_is_kept_alive_after_measure_paired_returns() -> None:
    gpu = FakeGpu()
    alive: weakref.WeakSet[Build] = weakref.WeakSet()

    def factory(kernel: float) -> Step:
        build = Build()
        alive.add(build)
        work = step(gpu, 0.0, [kernel])
        return Step(lambda: (build, work()), {})

    steps = {"a": lambda: factory(100e-6), "b": lambda: factory(200e-6)}
    backend = backend_on(gpu)
    measure_paired(steps, backend, ROUNDS.with_values({"max_time": 0.5}), device="cpu")
    gc.collect()
    assert len(alive) == 0


# ---------------------------------------------------------------- item 5: capture on the measured device


def test_graph_capture_for_cuda_1_after_cuda_0_captures_its_kernels() -> None:
    gpu = FakeGpu()
    block_timer(backend_on(gpu, 0), step(gpu, 0.0, [50e-6]), "graph")  # torch's capture stream is now on cuda:0
    backend = backend_on(gpu, 1)
    replay = backend.capture(step(gpu, 0.0, [50e-6] * 4))
    assert backend.time_block(replay, 10) / 10 == pytest.approx(200e-6, rel=1e-3)


# ---------------------------------------------------------------- issue 34: a step rebuilt every round, as ab times it

QUICK_ROUNDS = ROUNDS.with_values({"profile": "off"})


def front_loaded(gpu: FakeGpu, *, waits: bool) -> Callable[[], None]:
    """400 us of host work, then five 200 us kernels; ``waits``: the host waits for the device in between (for the
    previous call's work, as an ``.item()`` of its loss would), so the step synchronizes."""
    kernels = step(gpu, 0.0, [200e-6] * 5)

    def fn() -> None:
        gpu.spend(400e-6)
        if waits:
            gpu.drain()
        kernels()

    return fn


@pytest.mark.parametrize("waits", [False, True], ids=["launches", "synchronizes"])
def test_factories_in_paired_rounds_are_timed_as_a_loop_of_the_step(waits: bool) -> None:
    """Each round builds each step afresh, as ``ab`` does: what the backend learnt of a build's launch carries over
    to the next build of the step (every block was behind the first-guess lead: 1.332 ms for a loop's 1.000 ms, and
    1.332 ms for 1.005 ms where the step synchronizes, which was never found out)."""
    gpu = FakeGpu()
    loop = plain_loop(gpu, front_loaded(gpu, waits=waits))
    gpu = FakeGpu()
    factories = {name: (lambda: Step(front_loaded(gpu, waits=waits), {})) for name in ("base", "head")}
    rounds = measure_paired(factories, backend_on(gpu), QUICK_ROUNDS, device="cpu")
    for name in factories:
        assert rounds.measurements[name].median == pytest.approx(loop, rel=0.01), name


def test_builds_of_one_step_share_its_lead_and_other_steps_keep_theirs() -> None:
    """The lead carries over between builds of one step, not between steps (nor from one measure_paired to the
    next: ``ab`` names every workload's steps base and head)."""
    gpu = FakeGpu()
    backend = backend_on(gpu)
    factories = {
        "syncs": lambda: Step(front_loaded(gpu, waits=True), {}),
        "launches": lambda: Step(front_loaded(gpu, waits=False), {}),
    }
    measure_paired(factories, backend, QUICK_ROUNDS, device="cpu")
    spins = sum(name == "sleep" for name, _, _ in gpu.kernels)
    again = measure_paired(factories, backend, QUICK_ROUNDS, device="cpu")
    assert again.measurements["launches"].host_per_call is not None, "its own lead: not taken to synchronize"
    assert again.measurements["syncs"].host_per_call is None, "found out to synchronize again"
    assert sum(name == "sleep" for name, _, _ in gpu.kernels) > spins, "a new measure_paired starts afresh"


# ---------------------------------------------------------------- issue 34: a host-bound step's lead


def sampling_per_call(m: Measurement) -> float:
    return m.sampling_seconds / (len(m.samples) * m.iterations)


def test_a_host_bound_step_spends_about_its_figure_sampling_each_call() -> None:
    """9 us of host time for a 2 us kernel, about 111 calls a block: a lead sized from the host's time (1.5 ms) made
    the host wait for the spin after its 1 ms of launching, 1.75 times the figure in wall time per timed call."""
    gpu = FakeGpu(launch=9e-6)
    m = measured(step(gpu, 0.0, [2e-6]), gpu)
    assert m.host_bound and m.median == pytest.approx(9e-6, rel=0.05)
    assert m.device_per_call == pytest.approx(2e-6, rel=0.01)  # still with the queue kept full
    assert sampling_per_call(m) <= 1.2 * m.median


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "pageable"])
def test_a_host_bound_dataloader_step_spends_about_its_figure_sampling_each_call(pinned: bool) -> None:
    """10 ms of loading, then 4 ms of device work: the lead sized from the host's time (15 ms) took 19.2 ms of
    sampling per 10.1 ms call. A block of one call still waits for that call's device work after the host's (its
    4 ms tail, which a loop overlaps with the next call's loading), and a synchronizing (pageable) step's block
    starts with an untimed call: blocks of enough calls share either (``TAIL_SHARE``). At the default max_time."""
    gpu = FakeGpu()
    m = measured(loader_step(gpu, pinned=pinned), gpu, MeasureSettings(memory=False))
    assert m.median == pytest.approx(10.1e-3 if pinned else 11.1e-3, rel=1e-3)
    if pinned:
        assert m.host_bound and m.device_per_call == pytest.approx(4e-3, rel=1e-3)
    assert m.iterations > 1
    assert sampling_per_call(m) <= 1.2 * m.median
