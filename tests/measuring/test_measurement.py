"""Assertions judged on the confidence interval, with synthetic samples whose interval is known."""

from __future__ import annotations

import random
import warnings

import pytest

from pytest_gpuperf.measuring import Check, GpuperfAssertionError, InconclusiveWarning, Measurement
from tests.synthetic import make_measurement


def make(samples: list[float], *, inconclusive: str = "warn", checks: list[Check] | None = None) -> Measurement:
    return make_measurement(
        "t",
        samples,
        device_name="Test CPU",
        iterations=4,
        stop_reason="CI half-width 0.5% <= target 1.00%",
        work={"FLOP": 2e9, "samples": 256},
        inconclusive=inconclusive,
        observer=None if checks is None else checks.append,
    )


# 20 samples from 9.5 ms to 10.45 ms: 95% CI of the median is [x_(5), x_(14)] = [9.75, 10.2] ms.
SAMPLES = [(950 + 5 * i) * 1e-5 for i in range(20)]


def test_interval_and_throughput() -> None:
    m = make(SAMPLES)
    assert m.ci.low == pytest.approx(9.75e-3) and m.ci.high == pytest.approx(10.2e-3)
    assert m.throughput("FLOP").value == pytest.approx(2e9 / m.median)
    low, high = m.throughput_ci("FLOP/s")
    assert low.value == pytest.approx(2e9 / 10.2e-3) and high.value == pytest.approx(2e9 / 9.75e-3)
    assert str(m.throughput("samples")).endswith("k samples/s")


def test_passes_only_when_the_whole_interval_clears_the_bound() -> None:
    checks: list[Check] = []
    make(SAMPLES, checks=checks).assert_throughput(at_least="195 GFLOP/s")  # 2e9/10.2e-3 = 196 GFLOP/s
    make(SAMPLES, checks=checks).assert_latency(at_most="10.3 ms")
    assert [c.outcome for c in checks] == ["pass", "pass"]


def test_fails_when_the_whole_interval_is_on_the_wrong_side() -> None:
    checks: list[Check] = []
    with pytest.raises(GpuperfAssertionError) as info:
        make(SAMPLES, checks=checks).assert_throughput(at_least="210 GFLOP/s")  # above 2e9/9.75e-3 = 205
    message = str(info.value)
    assert "t: throughput at least 210 GFLOP/s expected, but median" in message
    assert "95% CI [196.1 GFLOP/s, 205.1 GFLOP/s] from 20 samples x 4 calls on cpu (Test CPU)" in message
    with pytest.raises(GpuperfAssertionError, match=r"latency at most 9\.7 ms expected"):
        make(SAMPLES, checks=checks).assert_latency(at_most="9.7 ms")
    assert [c.outcome for c in checks] == ["fail", "fail"]


def test_straddling_is_inconclusive_and_warns_or_fails() -> None:
    checks: list[Check] = []
    with pytest.warns(InconclusiveWarning, match="inconclusive: the interval straddles the bound"):
        make(SAMPLES, checks=checks).assert_latency(at_most="10 ms")
    with pytest.raises(GpuperfAssertionError, match="inconclusive"):
        make(SAMPLES, inconclusive="fail").assert_throughput(at_least="200 GFLOP/s")
    assert checks[0].outcome == "inconclusive"


def test_a_median_on_the_wrong_side_is_not_enough_to_fail() -> None:
    """The point estimate is below the bound, but the interval reaches above it: no failure."""
    m = make(SAMPLES)
    bound = 2e9 / m.median * 1.005  # just above the median throughput
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m.assert_throughput(at_least=f"{bound} FLOP/s")
    assert [w.category for w in caught] == [InconclusiveWarning]


def test_unit_mismatches_are_explained() -> None:
    m = make(SAMPLES)
    with pytest.raises(ValueError, match=r"no 'tokens' work was given \(have: FLOP, samples\)"):
        m.assert_throughput(at_least="1 tokens/s")
    with pytest.raises(ValueError, match="is not a rate"):
        m.assert_throughput(at_least="3 ms")
    with pytest.raises(ValueError, match="needs at_least= or at_most="):
        m.assert_throughput()


def test_dict_round_trip_keeps_raw_samples() -> None:
    m = make(SAMPLES)
    again = Measurement.from_dict(m.to_dict())
    assert again.samples == m.samples
    assert again.work == m.work
    assert again.warmup == m.warmup
    assert again.median == m.median


def test_a_drifting_step_is_flagged_and_a_steady_one_is_not() -> None:
    """A step that slows on every call (+8.6% over the run) once passed as converged at +-1.4%."""
    rng = random.Random(7)
    n = 200
    drifting = [1e-3 * (1 + 0.086 * i / (n - 1)) * (1 + rng.gauss(0, 0.01)) for i in range(n)]
    m = make_measurement("drifts", drifting)
    assert m.drift is not None and 0.05 < m.drift < 0.09
    steady = make_measurement("steady", [1e-3 * (1 + rng.gauss(0, 0.03)) for _ in range(n)])
    assert steady.drift is None


def test_mode_and_host_time_round_trip_and_flag_a_launch_bound_step() -> None:
    m = make_measurement("tiny", [2e-6] * 12, mode="graph", host_per_call=9e-6)
    again = Measurement.from_dict(m.to_dict())
    assert again.mode == "graph" and again.host_per_call == 9e-6 and again.launch_bound
    assert not make_measurement("big", [1e-3] * 12, host_per_call=9e-6).launch_bound
    old = {k: v for k, v in m.to_dict().items() if k not in ("mode", "host_per_call")}
    assert Measurement.from_dict(old).mode == "warm"  # files from before the field still load
