"""The sampler's logic, driven by a fake device on a fake clock: no real time passes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytest_gpuperf.measuring import FixedBudget, SamplingPlan
from pytest_gpuperf.measuring._sampling import (
    CiStopRule,
    FixedStopRule,
    SamplingResult,
    block_size,
    sample,
    stop_rule_for,
)


class FakeDevice:
    """A device whose k-th call takes ``per_call(k)`` seconds of fake time, times lognormal noise per block."""

    def __init__(
        self, per_call: Callable[[int], float], noise: float = 0.0, seed: int = 0, overhead: float = 0.0
    ) -> None:
        self.per_call = per_call
        #: read into every block's time (the timer's own cost): a block of one call shows it in full
        self.overhead = overhead
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.calls = 0
        self.blocks: list[int] = []

    def clock(self) -> float:
        return self.now

    def run_block(self, iterations: int) -> float:
        self.blocks.append(iterations)
        elapsed = sum(self.per_call(self.calls + i) for i in range(min(iterations, 50)))
        if iterations > 50:  # steady by then in every test; keep the fake cheap
            elapsed += (iterations - 50) * self.per_call(self.calls + iterations)
        self.calls += iterations
        if self.noise:
            elapsed *= float(self.rng.lognormal(0.0, self.noise))
        elapsed += self.overhead
        self.now += elapsed + 2e-6  # the host's own loop overhead
        return elapsed


def counted(result: SamplingResult) -> float:
    """The seconds the time caps count: from the first call's end (the warmup after it, and the samples)."""
    return result.seconds + result.warmup.seconds - result.warmup.block_times[0]


def test_warmup_waits_until_block_times_stop_falling() -> None:
    # A first call 50x slower (lazy init), then a transient that decays over 30 calls (caches, clocks).
    dev = FakeDevice(lambda k: 50e-3 if k == 0 else 1e-3 * (1 + 2.0 * 0.8**k), noise=0.005)
    result = sample(dev.run_block, SamplingPlan(), clock=dev.clock)
    assert result.warmup.steady
    assert result.warmup.calls >= 15
    assert max(result.samples) < 1.05e-3  # the transient stayed in the warmup
    assert result.converged


def test_a_slow_first_call_does_not_size_the_blocks() -> None:
    """Lazy init (1.5 s) longer than the warmup budget: blocks are still sized from the 2 us steady calls.

    Before the fix warmup ended after that one call, every sample was one call, and the
    timer's 0.18 us per read made the median 1.09x the true 2 us.
    """
    dev = FakeDevice(lambda k: 1.5 if k == 0 else 2e-6, noise=0.01, overhead=0.18e-6)
    plan = SamplingPlan(warmup_time=1.0)
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert result.warmup.block_times[0] == pytest.approx(1.5, rel=0.05)
    assert result.iterations * 2e-6 >= plan.min_block_time
    assert float(np.median(result.samples)) == pytest.approx(2e-6, rel=0.01)
    assert result.warmup.steady and result.converged


def test_blocks_are_resized_from_steady_samples() -> None:
    """A slow plateau (autotuning, say) looked steady to the warmup; the first samples show the block far too short."""
    dev = FakeDevice(lambda k: 5e-3 if k < 6 else 10e-6, noise=0.01, overhead=0.18e-6)
    plan = SamplingPlan()
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert result.warmup.resizes == 1
    assert result.iterations * 10e-6 >= 0.95 * plan.min_block_time
    assert float(np.median(result.samples)) == pytest.approx(10e-6, rel=0.01)
    # The short blocks are kept as warmup, not thrown away silently.
    assert len(result.warmup.block_times) == result.warmup.blocks >= 5


def test_the_median_shrugs_off_a_plateau_the_warmup_could_not_see() -> None:
    # Six slow calls at block size 1 look steady; the median of the samples is still right.
    dev = FakeDevice(lambda k: 20e-3 if k < 6 else 1e-3, noise=0.01)
    result = sample(dev.run_block, SamplingPlan(), clock=dev.clock)
    assert float(np.median(result.samples)) == pytest.approx(1e-3, rel=0.02)
    assert result.converged


def test_block_size_is_far_above_timer_resolution() -> None:
    dev = FakeDevice(lambda k: 50e-9, noise=0.01)
    plan = SamplingPlan(min_block_time=1e-3)
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert result.iterations * 50e-9 >= 1e-3
    assert result.iterations <= 1.1 * block_size(50e-9, plan)
    assert result.samples and all(s == pytest.approx(50e-9, rel=0.1) for s in result.samples)


def test_stops_when_the_median_ci_reaches_the_target() -> None:
    dev = FakeDevice(lambda k: 1e-3, noise=0.03, seed=1)
    plan = SamplingPlan(target=0.01, min_samples=10, min_time=0.05, max_time=100.0)
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert result.converged
    assert "<= target 1.00%" in result.stop_reason
    from pytest_gpuperf.measuring import median_ci

    ci = median_ci(result.samples)
    median = float(np.median(result.samples))
    # Checked at geometric steps, so the interval met the target when the rule fired.
    assert ci.relative_half_width(median) <= 0.0105
    assert len(result.samples) >= 10 and counted(result) >= 0.05


def test_tighter_targets_take_more_samples() -> None:
    counts = []
    for target in (0.05, 0.01, 0.003):
        dev = FakeDevice(lambda k: 1e-3, noise=0.03, seed=2)
        result = sample(dev.run_block, SamplingPlan(target=target, min_time=0.0, max_time=1e3), clock=dev.clock)
        assert result.converged
        counts.append(len(result.samples))
    assert counts[0] < counts[1] < counts[2]


def test_time_cap_says_the_target_was_not_reached() -> None:
    dev = FakeDevice(lambda k: 1e-3, noise=0.6, seed=3)
    plan = SamplingPlan(target=0.001, max_time=0.5)
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert not result.converged
    assert result.stop_reason.startswith("time cap 0.5 s reached before the 0.10% target")
    assert 0.5 <= counted(result) < 0.6  # the warmup after the first call counts too


def test_minimum_samples_and_time_are_respected() -> None:
    dev = FakeDevice(lambda k: 1e-3)  # no noise: the CI is zero-width at once
    plan = SamplingPlan(min_samples=25, min_time=0.2)
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert result.converged
    assert len(result.samples) >= 25
    assert counted(result) >= 0.2


def test_warmup_cap_when_times_keep_falling() -> None:
    dev = FakeDevice(lambda k: 1e-2 * 0.97**k)  # never steady
    plan = SamplingPlan(warmup_time=0.3, max_time=1.0)
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert not result.warmup.steady
    assert 0.28 <= result.warmup.seconds - result.warmup.block_times[0] <= 0.3  # no block started past the cap
    assert list(result.warmup.block_times) == sorted(result.warmup.block_times, reverse=True)


def test_slow_steps_still_give_samples() -> None:
    dev = FakeDevice(lambda k: 0.8, noise=0.02)
    plan = SamplingPlan(max_time=5.0, min_samples=5)
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert result.iterations == 1
    assert len(result.samples) >= 5


def test_a_zero_reading_timer_does_not_divide_by_zero() -> None:
    dev = FakeDevice(lambda k: 0.0)
    result = sample(dev.run_block, SamplingPlan(max_time=0.01, warmup_time=0.01), clock=dev.clock)
    assert result.iterations >= 1


def test_every_decision_goes_through_agree() -> None:
    """In a distributed run one rank's wish to stop stops every rank at the same block."""
    dev = FakeDevice(lambda k: 1e-3, noise=0.3, seed=4)
    decisions: list[bool] = []

    def agree(flag: bool) -> bool:
        decisions.append(flag)
        return flag or len(decisions) >= 40  # another rank stops at the 40th decision

    result = sample(dev.run_block, SamplingPlan(target=1e-6, max_time=100.0), clock=dev.clock, agree=agree)
    assert not result.converged
    assert result.stop_reason == "stopped with the other ranks"
    assert result.warmup.blocks + len(result.samples) == 40 == len(decisions)
    assert len(dev.blocks) == 40


def test_stop_rule_protocol_is_pluggable() -> None:
    dev = FakeDevice(lambda k: 1e-3)

    def seven_samples(samples: object, elapsed: float) -> tuple[bool, bool, str]:
        n = len(samples)  # type: ignore[arg-type]
        return n >= 7, n >= 7, "seven"

    result = sample(dev.run_block, SamplingPlan(), clock=dev.clock, stop_rule=seven_samples)
    assert len(result.samples) == 7 and result.stop_reason == "seven"
    rule = CiStopRule(SamplingPlan())
    assert rule([1e-3] * 3, 10.0) == (True, False, "time cap 5 s reached before the 1.00% target")


@pytest.mark.parametrize("seconds", [2e-6, 0.0])
def test_per_call_keeps_every_block_one_call(seconds: float) -> None:
    """Even a call far below ``min_block_time``, or a timer that reads zero, is timed one call per sample."""
    device = FakeDevice(lambda k: seconds)
    plan = SamplingPlan(min_samples=20, min_time=1e-3, max_time=0.01, warmup_time=1e-3, per_call=True)
    result = sample(device.run_block, plan, clock=device.clock)
    assert set(device.blocks) == {1} and result.iterations == 1
    assert block_size(1e-9, plan) == 1


# ---------------------------------------------------------------- a fixed budget (pytest-benchmark's pedantic)


def test_a_fixed_budget_is_kept_exactly_by_the_one_loop() -> None:
    """A slow first call, a transient and 10 us calls: the adaptive loop would warm up until steady and grow the
    blocks to 1 ms; the budget runs its 2 warmup blocks and 7 samples of 3 calls, nothing more."""
    dev = FakeDevice(lambda k: 50e-3 if k == 0 else 10e-6 * (1 + 0.8**k), noise=0.01)
    plan = SamplingPlan(budget=FixedBudget(rounds=7, iterations=3, warmup_rounds=2, caller="test"))
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert dev.blocks == [3] * 9
    assert len(result.samples) == 7 and result.iterations == 3
    warmup = result.warmup
    assert (warmup.blocks, warmup.calls, warmup.steady, warmup.resizes) == (2, 6, True, 0)
    assert warmup.block_times[0] > 10e-3  # the slow first call stays in the warmup blocks
    assert warmup.seconds == pytest.approx(sum(warmup.block_times) * 3 + 2 * 2e-6)
    assert result.stop_reason.startswith("test's fixed budget: 7 rounds x 3 iterations; CI half-width ")


def test_a_fixed_budget_has_no_time_cap_and_no_warmup_when_it_asks_for_none() -> None:
    dev = FakeDevice(lambda k: 1.0)  # every round outlasts the 0.05 s time cap
    plan = SamplingPlan(max_time=0.05, max_samples=2, budget=FixedBudget(rounds=6))
    result = sample(dev.run_block, plan, clock=dev.clock)
    assert dev.blocks == [1] * 6 and len(result.samples) == 6
    assert (result.warmup.blocks, result.warmup.steady, result.warmup.block_times) == (0, False, ())
    assert result.converged
    assert (
        result.stop_reason
        == "measure_fixed's fixed budget: 6 rounds x 1 iterations; CI half-width 0.00% <= target 1.00%"
    )


@pytest.mark.parametrize(
    ("samples", "stop"),
    [
        ([1e-3] * 4, (False, False, "")),  # one round to go: no stop, however long it took
        ([1e-3] * 5, (True, False, "b's fixed budget: 5 rounds x 2 iterations; a 95% interval needs 6 rounds")),
    ],
)
def test_the_fixed_stop_rule_stops_at_the_last_round(samples: list[float], stop: tuple[bool, bool, str]) -> None:
    plan = SamplingPlan()
    assert FixedStopRule(plan, FixedBudget(rounds=5, iterations=2, caller="b"))(samples, 1e9) == stop


def test_the_fixed_stop_rule_converges_only_when_its_interval_reaches_the_target() -> None:
    rule = FixedStopRule(SamplingPlan(target=0.01), FixedBudget(rounds=6))
    wide = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    assert rule(wide, 0.0) == (
        True,
        False,
        "measure_fixed's fixed budget: 6 rounds x 1 iterations; CI half-width 20.00% > target 1.00%",
    )
    plan = SamplingPlan(budget=FixedBudget(rounds=6))
    assert stop_rule_for(plan) == FixedStopRule(plan, FixedBudget(rounds=6))
    assert isinstance(stop_rule_for(SamplingPlan()), CiStopRule)


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"rounds": 0}, "Must have positive int for `rounds`."),
        ({"rounds": 2.0}, "Must have positive int for `rounds`."),
        ({"rounds": 1, "iterations": 0}, "Must have positive int for `iterations`."),
        ({"rounds": 1, "warmup_rounds": True}, "Must have positive int for `warmup_rounds`."),
    ],
)
def test_a_bad_fixed_budget_is_refused_with_pytest_benchmarks_messages(budget: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        FixedBudget(**budget)


def test_the_warmup_takes_at_most_half_of_max_time() -> None:
    dev = FakeDevice(lambda k: 1e-2 * 0.97**k)  # never steady
    result = sample(dev.run_block, SamplingPlan(warmup_time=1.0, max_time=0.2), clock=dev.clock)
    assert result.warmup.seconds - result.warmup.block_times[0] <= 0.1
    assert 0.2 <= counted(result) <= 0.2 + 0.01  # past the cap by one block at most


def test_a_step_longer_than_max_time_gets_the_first_call_and_one_sample() -> None:
    """Issue 23: max_time=1 on a 5 s step; main ran 2 warmup calls and 1 sample (15 s here, 32.6 s with memory)."""
    dev = FakeDevice(lambda k: 5.0)
    result = sample(dev.run_block, SamplingPlan(max_time=1.0), clock=dev.clock)
    assert dev.blocks == [1, 1] and len(result.samples) == 1
    assert not result.converged and result.stop_reason.startswith("time cap 1 s reached")
    assert dev.now < 10.01


@pytest.mark.parametrize("seconds", [0.3, 0.04, 2e-3])
def test_warmup_and_samples_keep_to_max_time_plus_one_block(seconds: float) -> None:
    dev = FakeDevice(lambda k: seconds * (3.0 if k == 0 else 1.0), noise=0.3, seed=5)  # a slow first call
    result = sample(dev.run_block, SamplingPlan(target=1e-4, max_time=1.0), clock=dev.clock)
    block = max(result.samples) * result.iterations  # the longest block: the most one can run past the cap
    assert not result.converged
    assert 1.0 <= counted(result) <= 1.0 + block + 1e-3
    assert dev.now - result.warmup.block_times[0] <= 1.0 + block + 1e-3


class TailedDevice(FakeDevice):
    """Each block also costs ``tail`` seconds of wall time outside its figure, which it reports (``sample``'s
    ``tail``): a host-bound CUDA step's last device work, a synchronizing step's untimed call."""

    def __init__(self, per_call: float, tail: float) -> None:
        super().__init__(lambda k: per_call)
        self.tail = tail

    def run_block(self, iterations: int) -> float:
        elapsed = super().run_block(iterations)
        self.now += self.tail
        return elapsed


@pytest.mark.parametrize("max_time", [1.0, 5.0])
def test_a_block_tail_is_shared_by_enough_calls_to_be_a_tenth_of_the_block(max_time: float) -> None:
    """10 ms calls, each block 4 ms of tail: one call a block spent 1.4 times the figure sampling each call."""
    dev = TailedDevice(10e-3, 4e-3)
    result = sample(dev.run_block, SamplingPlan(max_time=max_time), clock=dev.clock, tail=lambda: dev.tail)
    assert result.iterations == 4  # ceil(4 ms / (10% of 10 ms))
    assert result.seconds / (len(result.samples) * result.iterations) <= 1.11 * 10e-3
    assert float(np.median(result.samples)) == pytest.approx(10e-3)


def test_a_tail_never_grows_a_block_past_its_ceiling_nor_under_per_call() -> None:
    dev = TailedDevice(10e-3, 40e-3)
    result = sample(dev.run_block, SamplingPlan(max_time=0.5), clock=dev.clock, tail=lambda: dev.tail)
    assert result.iterations == 2  # 5% of max_time: 25 ms, two calls
    dev = TailedDevice(10e-3, 40e-3)
    result = sample(dev.run_block, SamplingPlan(max_time=5, per_call=True), clock=dev.clock, tail=lambda: dev.tail)
    assert set(dev.blocks) == {1}


def test_without_a_tail_blocks_are_sized_by_their_time_alone() -> None:
    dev = TailedDevice(10e-3, 4e-3)
    assert sample(dev.run_block, SamplingPlan(), clock=dev.clock).iterations == 1
