"""``measure_fixed``: a fixed budget kept exactly (pytest-benchmark's ``pedantic``), on a fake clock."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_gpuperf.measuring import FixedBudget, FixedCall, MeasureSettings, Subject, measure_fixed
from pytest_gpuperf.measuring._backends import CpuBackend


class FakeTime:
    """A nanosecond clock that moves only when a step runs."""

    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def step(self, ms: float) -> str:
        self.ns += int(ms * 1e6)
        return f"{ms} ms"


def test_the_budget_is_kept_exactly() -> None:
    time = FakeTime()
    backend = CpuBackend(clock_ns=time)
    calls: list[int] = []

    def target(ms: float) -> str:
        calls.append(1)
        return time.step(ms)

    measurement, result = measure_fixed(
        FixedCall(target, args=(2.0,)),
        backend,
        MeasureSettings(),
        FixedBudget(rounds=6, iterations=3, warmup_rounds=2, caller="test"),
        Subject("fixed", "cpu"),
    )
    assert result == "2.0 ms"  # the last call's result
    assert len(calls) == (2 + 6) * 3  # nothing more: not even a call for peak memory
    assert measurement.samples == pytest.approx([2e-3] * 6)
    assert measurement.iterations == 3
    assert (measurement.warmup.blocks, measurement.warmup.calls) == (2, 6)
    assert measurement.converged
    assert measurement.stop_reason.startswith("test's fixed budget: 6 rounds x 3 iterations; CI half-width 0.00%")
    assert measurement.memory.method == "off: test runs its own budget only"


def test_too_few_rounds_claim_no_interval() -> None:
    time = FakeTime()
    measurement, _ = measure_fixed(
        FixedCall(lambda: time.step(1.0)),
        CpuBackend(clock_ns=time),
        MeasureSettings(),
        FixedBudget(5),
        Subject("m", "cpu"),
    )
    assert not measurement.converged
    assert measurement.stop_reason == (
        "measure_fixed's fixed budget: 5 rounds x 1 iterations; a 95% interval needs 6 rounds"
    )


def test_setup_gives_each_round_its_arguments_outside_the_time() -> None:
    time = FakeTime()
    log: list[Any] = []

    def setup() -> tuple[tuple[float], dict[str, Any]]:
        time.step(50.0)  # not timed
        log.append("setup")
        return (1.0,), {}

    def teardown(ms: float) -> None:
        time.step(50.0)  # not timed
        log.append(f"teardown {ms}")

    measurement, _ = measure_fixed(
        FixedCall(lambda ms: log.append(time.step(ms)), setup=setup, teardown=teardown),
        CpuBackend(clock_ns=time),
        MeasureSettings(),
        FixedBudget(rounds=2),
        Subject("m", "cpu"),
    )
    assert log == ["setup", "1.0 ms", "teardown 1.0", "setup", "1.0 ms", "teardown 1.0"]
    assert measurement.samples == pytest.approx([1e-3, 1e-3])
    with pytest.raises(TypeError, match="Can't use `args` or `kwargs` if `setup` returns the arguments"):
        measure_fixed(
            FixedCall(lambda ms: None, args=(1,), setup=setup),
            CpuBackend(),
            MeasureSettings(),
            FixedBudget(rounds=1),
            Subject("m", "cpu"),
        )


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"rounds": 0}, "Must have positive int for `rounds`."),
        ({"rounds": 1, "iterations": True}, "Must have positive int for `iterations`."),
        ({"rounds": 1, "warmup_rounds": -1}, "Must have positive int for `warmup_rounds`."),
        ({"rounds": 1, "iterations": 2, "setup": lambda: None}, "Can't use more than 1 `iterations` with a `setup`"),
    ],
)
def test_a_bad_budget_is_refused_before_anything_runs(budget: dict[str, Any], message: str) -> None:
    calls: list[int] = []
    setup = budget.pop("setup", None)
    with pytest.raises(ValueError, match=re.escape(message)):
        measure_fixed(
            FixedCall(lambda: calls.append(1), setup=setup),
            CpuBackend(),
            MeasureSettings(),
            FixedBudget(**budget),
            Subject("m", "cpu"),
        )
    assert calls == []
