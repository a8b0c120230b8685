"""The batch-scaling suite's judgement and ladder, on synthetic rungs and a stand-in that runs out of memory."""

from __future__ import annotations

import weakref
from typing import Any

import pytest
import torch

from suites.test_batch_scaling import MAX_FALL, Rung, climb, judge, ladder


def rung(batch: int, median: float, spread: float = 0.02) -> Rung:
    return Rung(batch, median, median * (1 - spread), median * (1 + spread))


def test_the_ladder_doubles_up_to_the_last_batch() -> None:
    assert ladder(32, 512) == [32, 64, 128, 256, 512]
    assert ladder(8, 63) == [8, 16, 32]
    with pytest.raises(ValueError, match="give 1 <= first <= last"):
        ladder(64, 32)


def test_a_rising_curve_that_plateaus_and_then_falls_passes() -> None:
    # A fall after saturation (a batch that leaves the caches) is reported, not asserted.
    verdict = judge([rung(32, 10e3), rung(64, 20e3), rung(128, 40e3), rung(256, 42e3), rung(512, 25e3)])
    assert verdict.failure is None
    assert verdict.saturation == 2  # 40k is within 90% of the best, 42k


def test_a_fall_before_saturation_beyond_both_intervals_fails() -> None:
    verdict = judge([rung(32, 10e3), rung(64, 20e3), rung(128, 12e3), rung(256, 40e3)])
    assert verdict.saturation == 3
    assert verdict.failure is not None
    assert "batch 128" in verdict.failure and "against batch 64" in verdict.failure
    assert verdict.fell == (1, 2)  # the best rung before it, and the one that fell


def test_a_fall_within_the_intervals_or_the_allowance_passes() -> None:
    # Wide intervals overlap: noise, not a fall.
    assert judge([rung(32, 10e3), rung(64, 20e3, 0.3), rung(128, 17e3, 0.3), rung(256, 40e3)]).failure is None
    # Narrow intervals, but the gap is within MAX_FALL: a change of load between two rungs is allowed for.
    small_fall = 20e3 * (1 - MAX_FALL / 2)
    assert judge([rung(32, 10e3), rung(64, 20e3, 0.01), rung(128, small_fall, 0.01), rung(256, 40e3)]).failure is None


def test_no_rungs_is_no_verdict() -> None:
    assert judge([]).saturation is None


class OutOfMemoryError(RuntimeError):
    """Named as torch.OutOfMemoryError (CUDA's), which the plugin's is_out_of_memory recognizes by name."""


def test_out_of_memory_stops_the_ladder_and_frees_the_rung() -> None:
    held: list[weakref.ref[torch.Tensor]] = []
    released: list[int] = []

    def run(batch: int) -> Rung:
        working_set = torch.ones(batch)  # what the rung holds when it runs out of memory
        held.append(weakref.ref(working_set))
        if batch >= 256:
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (stand-in)")
        return rung(batch, float(batch))

    def release() -> None:
        import gc

        gc.collect()
        released.append(len(held))

    rungs, stop = climb(ladder(32, 4096), run, release=release)
    assert [r.batch for r in rungs] == [32, 64, 128]
    assert stop == "batch 256 ran out of memory (CUDA out of memory. Tried to allocate 2.00 GiB (stand-in))"
    assert released == [1, 2, 3, 4]  # after every rung, the failed one too
    assert all(ref() is None for ref in held), "the failed rung's tensors are still alive"


def test_the_cpu_allocators_failure_stops_it_too_and_other_errors_propagate() -> None:
    def cpu_oom(batch: int) -> Rung:
        if batch > 32:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 GiB")
        return rung(batch, 1.0)

    rungs, stop = climb([32, 64], cpu_oom, release=lambda: None)
    assert len(rungs) == 1 and "can't allocate memory" in stop

    def broken(batch: int) -> Rung:
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        climb([32], broken, release=lambda: None)


def test_the_memory_limit_stops_before_a_rung_that_cannot_fit() -> None:
    calls: list[int] = []

    def run(batch: int) -> Rung:
        calls.append(batch)
        return Rung(batch, 1.0, 0.9, 1.1, peak_memory=batch << 20)

    rungs, stop = climb([64, 128, 256, 512], run, memory_limit=300 << 20, release=lambda: None)
    assert calls == [64, 128, 256]  # batch 256 needs twice batch 128's 128 MiB: it fits in 300 MiB
    assert stop.startswith("batch 512 would need up to 512 MiB (twice batch 256's peak memory, its high-water mark)")
    assert "more than the device's 300 MiB" in stop
    assert len(rungs) == 3


def test_release_returns_cuda_cached_blocks_through_a_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # The release after each rung is the plugin's, after a failed test: collect, then empty CUDA's cache.
    from pytest_gpuperf.plugin import _gate

    emptied: list[bool] = []

    class Cuda:
        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def is_initialized() -> bool:
            return True

        @staticmethod
        def empty_cache() -> None:
            emptied.append(True)

    class FakeTorch:
        cuda = Cuda

    fake: Any = FakeTorch()
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    _gate.release_failed_test_memory()
    assert emptied == [True]


# The ladder's steps in an inner run: a call sleeps 2 ms plus 0.1 ms a sample, so throughput rises up the ladder
# 8, 16, 32 and saturates at 32. ``SLOW`` says which builds of batch 16 sleep three times as long: its first build
# only (a burst of load while that rung was measured) or every build (a real fall).
_LADDER_TEST = """
import time

import pytest

from pytest_gpuperf.measuring import Step
from suites.test_batch_scaling import run_ladder

SLOW = {slow!r}


def test_ladder(gpuperf):
    builds = []

    def build(batch):
        builds.append(batch)
        slow = batch == 16 and (SLOW == "always" or builds.count(16) == 1)
        seconds = (2e-3 + 1e-4 * batch) * (3 if slow else 1)
        return Step(lambda: time.sleep(seconds), {{"samples": batch}}, check=lambda: None)

    run_ladder(gpuperf, "sleeper", "samples", 8, 32, build)
    assert builds == [8, 16, 32, 8, 16]
"""


@pytest.mark.parametrize(("slow", "outcome"), [("first", "passed"), ("always", "failed")])
def test_a_fall_is_confirmed_in_interleaved_rounds_before_it_fails(
    pytester: pytest.Pytester, slow: str, outcome: str
) -> None:
    pytester.makepyfile(test_ladder=_LADDER_TEST.format(slow=slow))
    result = pytester.runpytest("--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.02", "-p", "no:randomly")
    result.assert_outcomes(**{outcome: 1})
    result.stdout.fnmatch_lines(["*sleeper: throughput fell*confirming in interleaved rounds of batch 8 and 16"])
    # The rounds' ratio is the steps' own (1.56, and 0.52 for the real fall), whatever the ladder saw.
    median = "1.5*" if slow == "first" else "0.5*"
    result.stdout.fnmatch_lines([f"*samples/s of batch=16 / samples/s of batch=8 at least 0.9*median {median}"])
