"""Assertions judged on the confidence interval, with synthetic samples whose interval is known."""

from __future__ import annotations

import math
import random
import re
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
    assert again.mode == "graph" and again.host_per_call == 9e-6 and again.host_bound
    assert not make_measurement("big", [1e-3] * 12, host_per_call=9e-6).host_bound
    old = {k: v for k, v in m.to_dict().items() if k not in ("mode", "host_per_call")}
    assert Measurement.from_dict(old).mode == "warm"  # files from before the field still load


# ---------------------------------------------------------------- too few samples for the interval claimed


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_fewer_than_six_samples_decide_nothing(n: int) -> None:
    """From n < 6 samples no interval reaches 95%: a bound the range meets is no pass, one it misses no fail."""
    samples = [0.3 + 0.001 * i for i in range(n)]
    checks: list[Check] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make(samples, checks=checks).assert_latency(at_most="0.31 s")  # the whole range is below
        make(samples, checks=checks).assert_latency(at_most="0.1 s")  # the whole range is above
        make(samples, checks=checks).assert_throughput(at_least="1 GFLOP/s")
    assert [c.outcome for c in checks] == ["inconclusive"] * 3
    assert [w.category for w in caught] == [InconclusiveWarning] * 3
    messages = [str(w.message) for w in caught]
    need = "a distribution-free 95% interval of the median needs at least 6"
    assert all(f"only {n} sample{'s' if n > 1 else ''}, and {need}" in m for m in messages)
    assert "on the right side of the bound" in messages[0] and "on the wrong side of the bound" in messages[1]
    assert all("95% CI" not in m and "--gpuperf-min-samples=6" in m for m in messages)
    if n == 1:
        assert "one sample is a point, not an interval: 300 ms from 1 sample x 4 calls" in messages[0]
    else:
        coverage = f"{(1 - 2 * 0.5**n) * 100:.4g}%"  # 93.75% for 5: the full range's coverage
        assert f"the {coverage} interval [300 ms, {300 + n - 1} ms] from {n} samples" in messages[0]


def test_too_few_samples_fail_when_inconclusive_checks_fail() -> None:
    with pytest.raises(GpuperfAssertionError, match="inconclusive: only 1 sample, and a distribution-free 95%"):
        make([0.3002], inconclusive="fail").assert_latency(at_most="0.31 s")


def test_six_samples_give_a_95_percent_interval() -> None:
    m = make([0.3 + 0.001 * i for i in range(6)])
    assert not m.too_few_samples and m.ci.confidence == pytest.approx(1 - 2 / 64)
    m.assert_latency(at_most="0.31 s")  # filterwarnings=error: a warning would fail this test
    assert m.ci_text.startswith("+-")


def test_too_few_samples_show_no_interval_and_the_json_says_what_the_range_covers() -> None:
    one, three = make([0.3002]), make([0.3, 0.31, 0.32])
    assert one.ci_text == "- (1 sample)" and three.ci_text == "- (3 samples)"
    assert "CI - (1 sample)" in one.describe() and "+-0.0%" not in one.describe()
    assert one.to_dict()["stats"]["ci_confidence"] == 0.0  # a point covers the median with probability 0
    assert three.to_dict()["stats"]["ci_confidence"] == pytest.approx(0.75)
    assert Measurement.from_dict(three.to_dict()).too_few_samples


@pytest.mark.parametrize(
    ("method", "bound", "shown"),
    [
        ("assert_latency", {"at_most": math.nan}, "at_most=nan"),
        ("assert_latency", {"at_most": math.inf}, "at_most=inf"),
        ("assert_latency", {"at_most": "-3 ms"}, "at_most='-3 ms'"),
        ("assert_latency", {"at_most": -1}, "at_most=-1"),
        ("assert_latency", {"at_least": "0 s"}, "at_least='0 s'"),
        ("assert_throughput", {"at_least": "0 TFLOP/s"}, "at_least='0 TFLOP/s'"),
        ("assert_throughput", {"at_most": "-5 GFLOP/s"}, "at_most='-5 GFLOP/s'"),
    ],
)
def test_a_bound_that_is_not_positive_and_finite_is_bad_input(
    method: str, bound: dict[str, object], shown: str
) -> None:
    checks: list[Check] = []
    kind = "time" if method == "assert_latency" else "rate"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before judging: no warning, no check recorded
        with pytest.raises(
            ValueError, match=rf"^{method}\({re.escape(shown)}\): the bound must be a positive, finite {kind}, such as "
        ):
            getattr(make(SAMPLES, checks=checks), method)(**bound)
    assert checks == []


def test_a_bad_bound_is_refused_before_any_other_is_judged() -> None:
    checks: list[Check] = []
    with pytest.raises(ValueError, match="at_most='0 ms'"):
        make(SAMPLES, checks=checks).assert_latency(at_least="1 ms", at_most="0 ms")
    assert checks == []


# ---------------------------------------------------------------- per-call percentiles


def per_call(samples: list[float], *, inconclusive: str = "warn", checks: list[Check] | None = None) -> Measurement:
    return make_measurement(
        "t",
        samples,
        device_name="Test CPU",
        iterations=1,
        single_calls=True,
        inconclusive=inconclusive,
        observer=None if checks is None else checks.append,
    )


# 400 calls, shuffled: 1.00 ms to 1.399 ms in 1 us steps, so the p99's 95% interval is [x_(391), x_(399)] (0-based).
CALLS = [(1000 + i) * 1e-6 for i in range(400)]
random.Random(3).shuffle(CALLS)


def test_per_call_percentiles_and_their_interval() -> None:
    m = per_call(CALLS)
    tail = m.percentiles
    assert tail is not None and list(tail) == [50, 90, 99]
    assert tail[99] == pytest.approx(1.39501e-3) and tail[50] == pytest.approx(1.1995e-3)
    ci = m.percentile_ci(99)
    assert [ci.low, ci.high] == pytest.approx([1.391e-3, 1.399e-3]) and ci.confidence >= 0.95
    assert m.percentile_text(99) == "1.395 ms"
    assert "p50 1.2 ms p90 1.359 ms p99 1.395 ms" in m.describe()


def test_percentile_assertions_pass_fail_and_are_inconclusive_from_too_few_calls() -> None:
    checks: list[Check] = []
    per_call(CALLS, checks=checks).assert_latency(at_most="1.4 ms", percentile=99)
    with pytest.raises(GpuperfAssertionError) as info:
        per_call(CALLS, checks=checks).assert_latency(at_most="1.38 ms", percentile=99)
    message = str(info.value)
    assert "t: p99 latency at most 1.38 ms expected, but p99 1.395 ms, 95% CI [1.391 ms, 1.399 ms]" in message
    assert "from 400 samples x 1 calls" in message
    few = CALLS[:367]  # one short of the 368 a p99 interval needs at 95%
    with pytest.warns(InconclusiveWarning) as caught:
        per_call(few, checks=checks).assert_latency(at_most="10 ms", percentile=99)
    text = str(caught[0].message)
    assert "p99 latency at most 10 ms is inconclusive: only 367 samples" in text
    assert "a distribution-free 95% interval of the 99th percentile needs at least 368" in text
    assert "--gpuperf-min-samples=368" in text
    with pytest.raises(GpuperfAssertionError, match="inconclusive: only 367 samples"):
        per_call(few, inconclusive="fail", checks=checks).assert_latency(at_most="10 ms", percentile=99)
    assert [c.outcome for c in checks] == ["pass", "fail", "inconclusive", "inconclusive"]
    assert checks[0].what == "p99 latency"
    assert per_call(few).percentile_text(99) == "- (367 samples)"


def test_percentiles_of_block_means_are_refused_with_the_fix() -> None:
    m = make(SAMPLES)  # blocks of 4 calls
    assert m.percentiles is None and m.percentile_text(99) == "-"
    with pytest.raises(ValueError, match=r"mean of a block of 4 calls.*--gpuperf-per-call"):
        m.assert_latency(at_most="1 s", percentile=99)
    graph = make_measurement("g", SAMPLES, iterations=1, mode="graph")  # a share of a graph of several calls
    with pytest.raises(ValueError, match="share of a CUDA graph replay"):
        graph.percentile(99)


@pytest.mark.parametrize("bad", [0, 100, -1, 150, True, "99", float("nan")])
def test_a_percentile_must_be_between_0_and_100(bad: object) -> None:
    with pytest.raises(ValueError, match="between 0 and 100"):
        per_call(CALLS).assert_latency(at_most="1 s", percentile=bad)  # type: ignore[arg-type]


def test_single_calls_and_percentiles_round_trip_and_old_files_still_load() -> None:
    data = per_call(CALLS).to_dict()
    assert data["single_calls"] is True and data["stats"]["p99"] == pytest.approx(1.39501e-3)
    back = Measurement.from_dict(data)
    assert back.single_calls and back.percentiles == per_call(CALLS).percentiles
    old = {k: v for k, v in data.items() if k != "single_calls"}
    old["stats"] = {k: v for k, v in data["stats"].items() if not k.startswith("p")}
    loaded = Measurement.from_dict(old)
    assert not loaded.single_calls and loaded.percentiles is None  # no claim made, none invented
    assert "p99" not in make(SAMPLES).to_dict()["stats"]
