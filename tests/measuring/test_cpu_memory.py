"""CPU peak memory: the allocation-event arithmetic on made-up events, and the probe on real torch steps."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch

from pytest_gpuperf.measuring import MeasureSettings
from pytest_gpuperf.measuring._backends import CpuBackend
from pytest_gpuperf.measuring._cpu_memory import (
    CALLS,
    CallPeak,
    peaks_of_calls,
    profiler_noise_filtered,
    steady_peak,
)
from pytest_gpuperf.measuring._memory import peak_memory

MiB = 2**20

# ---------------------------------------------------------------- the arithmetic


def test_one_call_peaks_at_the_maximum_of_its_running_sum() -> None:
    (peak,) = peaks_of_calls([[(1, 100), (2, 50), (1, -100), (3, 10)]])
    assert peak == CallPeak(150, 150) and peak.exact
    assert peaks_of_calls([[]]) == [CallPeak(0, 0)]


def test_an_address_reused_within_a_call_is_a_new_block() -> None:
    (peak,) = peaks_of_calls([[(1, 100), (1, -100), (1, 30), (2, 30)]])
    assert peak == CallPeak(100, 100)


def test_a_free_is_sized_from_the_allocation_seen_in_an_earlier_call_not_from_the_event() -> None:
    # torch may report a stale size for a free; the probe's own record of the block counts.
    settle, measured = peaks_of_calls([[(1, 100)], [(1, -999), (2, 160)]])
    assert settle == CallPeak(100, 100)
    assert measured == CallPeak(60, 60), "160 allocated after 100 freed: 60 above the level at the start"


def test_the_level_at_the_start_is_the_floor_of_a_call_that_frees_first() -> None:
    _, measured = peaks_of_calls([[(1, 100)], [(1, -100), (2, 60), (2, -60)]])
    assert measured == CallPeak(0, 0), "the running sum went negative; the peak is the level at the start"


def test_a_free_of_a_block_older_than_the_probe_bounds_the_peak() -> None:
    # Its size is unknown: counted as freeing nothing, the curve after it is an upper bound.
    after, before = peaks_of_calls([[(1, 100), (7, -40)], [(8, -40), (2, 100)]])
    assert after == CallPeak(100, 100) and after.exact, "the free came after the peak: the peak is exact"
    assert before == CallPeak(0, 100) and not before.exact


def test_the_first_call_settles_and_the_measured_calls_must_agree() -> None:
    assert steady_peak([CallPeak(24, 24), CallPeak(20, 20), CallPeak(20, 20)]) == (20, None)
    assert steady_peak([CallPeak(5, 5), CallPeak(1000, 1000), CallPeak(995, 995)]) == (1000, None)
    peak, reason = steady_peak([CallPeak(0, 0), CallPeak(4 * MiB, 4 * MiB), CallPeak(8 * MiB, 8 * MiB)])
    assert peak is None
    assert reason == (
        "unknown: consecutive calls peaked at 4 MiB and 8 MiB; the step's memory use changes from call to call"
    )


def test_a_peak_that_may_be_wrong_is_unknown_with_its_bounds() -> None:
    peak, reason = steady_peak([CallPeak(0, 0), CallPeak(MiB, 3 * MiB), CallPeak(3 * MiB, 3 * MiB)])
    assert peak is None
    assert reason == (
        "unknown: the step freed memory allocated before the probe started, ahead of its peak "
        "(the peak is between 1 MiB and 3 MiB)"
    )


def test_a_single_block_is_taken_as_it_is() -> None:
    assert steady_peak([CallPeak(7, 7)]) == (7, None)
    assert steady_peak([]) == (None, "unknown: the step was not run under the probe")


# ---------------------------------------------------------------- the probe on real torch


def _probe(step: Callable[[], object]) -> tuple[int | None, str]:
    """The transient part of a CPU call (torch's allocator's growth above its start) and how it was read."""
    reading = peak_memory(step, CpuBackend(), MeasureSettings(), "cpu")
    return reading.transient, reading.transient_method


def test_a_step_that_frees_what_the_previous_call_left_gets_its_true_peak() -> None:
    n = MiB // 4  # 1 MiB of float32
    state = {"kept": torch.ones(4 * n)}  # allocated before the probe, as the timing loop leaves it

    def step() -> None:
        state.pop("kept")  # -4 MiB: last call's block, as zero_grad drops last step's gradients
        scratch = torch.ones(8 * n)  # +8 MiB: 4 above the start
        state["kept"] = torch.ones(4 * n)  # +4 MiB: the peak, 8 above the start
        del scratch

    peak, method = _probe(step)
    assert method == "torch.profiler CPU allocator events"
    assert peak is not None
    # A few bytes of bookkeeping aside; summing torch's events as they come would say 12 MiB.
    assert 8 * MiB <= peak < 8 * MiB + 64 * 1024


def test_a_step_whose_memory_alternates_is_unknown() -> None:
    calls = []

    def step() -> None:
        calls.append(1)
        torch.ones((1 + len(calls) % 2) * MiB // 4)

    assert _probe(step) == (
        None,
        "unknown: consecutive calls peaked at 1 MiB and 2 MiB; the step's memory use changes from call to call",
    )
    assert len(calls) == CALLS + 1  # and one more, without the profiler, for the process's RSS


def test_a_free_of_a_block_torch_sized_before_the_probe_makes_the_peak_unknown() -> None:
    old = {}
    with CpuBackend().track_memory():  # torch's allocator now knows this block's size
        old["block"] = torch.ones(MiB)
    calls = []

    def step() -> None:
        calls.append(1)
        if len(calls) == 2:
            del old["block"]  # in the first measured call, before its peak
        torch.ones(MiB // 4)

    peak, reason = _probe(step)
    assert peak is None
    assert reason.startswith("unknown: the step freed memory allocated before the probe started")


def test_five_probes_of_a_zero_grad_training_step_agree() -> None:
    # The case: zero_grad(set_to_none=True) frees the gradients of the call before.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(torch.nn.functional.cross_entropy(model(x), y))
        optimizer.step()

    peaks = []
    # Between probes, calls as timing makes them (none, or blocks torch never saw allocated).
    for timing_calls in (3, 0, 4, 0, 1):
        for _ in range(timing_calls):
            step()
        peak, reason = _probe(step)
        assert peak is not None, reason
        peaks.append(peak)
    assert max(peaks) <= 1.1 * min(peaks), f"peaks of five identical probes: {peaks}"
    assert min(peaks) > 0


def test_the_profilers_own_lines_are_kept_off_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with profiler_noise_filtered():
        os.write(2, b"USDT:2026-11-22 21:46:13 25012:25012 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"the test's own line\n")
        # torch 2.3's kineto announces its stages (seen with torch 2.3.1, 2026-11-23)
        os.write(2, b"STAGE:2026-11-23 01:49:04 21604:21604 ActivityProfilerController.cpp:314] ")
        os.write(2, b"Completed Stage: Warm Up\n")
        os.write(2, b"[W1122 CPUAllocator.cpp:245] Memory block of unknown size was allocated before the ")
        os.write(2, b"profiling started, profiler results will not include the deallocation event\n")
    assert capfd.readouterr().err == "the test's own line\n"
    with CpuBackend().track_memory() as probe:
        for _ in probe.calls():
            torch.ones(10)
    assert capfd.readouterr().err == ""


# ---------------------------------------------------------------- a start that fails (issue 37, item 3)


def test_a_profiler_window_that_fails_to_start_is_never_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's second window refused (a profiler of the test's own, a thread the machine refused): the start's
    error is the one raised, and no stop is sent to a profiler that never started (it would end another's session)."""
    import torch.autograd.profiler

    exited: list[int] = []

    class Profile:
        made = 0

        def __init__(self, **kwargs: object) -> None:
            Profile.made += 1
            self.number = Profile.made
            self.kineto_results = None

        def __enter__(self) -> None:
            if self.number == 2:
                raise RuntimeError("Profiler is already enabled on this thread.")

        def __exit__(self, *exc: object) -> None:
            exited.append(self.number)

    monkeypatch.setattr(torch.autograd.profiler, "profile", Profile)
    monkeypatch.setattr("pytest_gpuperf.measuring._cpu_memory._cpu_allocations", lambda results: ([], 0))

    def probe_all() -> None:
        with CpuBackend().track_memory() as probe:
            for _ in probe.calls():
                pass

    with pytest.raises(RuntimeError, match=r"^Profiler is already enabled on this thread\.$"):
        probe_all()
    assert exited == [1]


def test_a_temporary_for_the_profilers_lines_that_cannot_be_made_leaves_stderr_as_it_was(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A full or missing temporary directory: the block runs with its lines unfiltered, and no descriptor is left
    open (one a test, until the process has none)."""
    import errno
    import tempfile

    def full(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", full)
    before = sorted(os.listdir("/proc/self/fd"))
    with profiler_noise_filtered():
        os.write(2, b"the test's own line\n")
    assert sorted(os.listdir("/proc/self/fd")) == before
    assert capfd.readouterr().err == "the test's own line\n"
