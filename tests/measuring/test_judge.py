"""The narrow interval judge: an Estimate, a relation and a bound; how values read, what an undecided check does and
where the Check goes come from a JudgeContext."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest

from pytest_gpuperf.measuring import (
    Check,
    Estimate,
    GpuperfAssertionError,
    InconclusiveWarning,
    JudgeContext,
    expect_estimate,
)
from pytest_gpuperf.measuring._judge import judge
from tests.synthetic import make_measurement

#: A speedup from 12 paired rounds whose 95% interval is [1.3, 1.7].
SPEEDUP = Estimate("speedup", 1.5, 1.3, 1.7, 0.96, 12, nominal=0.95)


def test_a_whole_interval_on_the_right_side_passes_and_the_observer_gets_the_check() -> None:
    seen: list[Check] = []
    check = judge(SPEEDUP, ">=", 1.1, JudgeContext(observer=seen.append))
    assert seen == [check]
    assert check == Check(
        "speedup", ">=", "1.1", "pass", "speedup at least 1.1: met; median 1.5, 95% CI [1.3, 1.7] from 12 paired rounds"
    )


def test_a_whole_interval_on_the_wrong_side_fails_after_the_observer_has_the_check() -> None:
    seen: list[Check] = []
    with pytest.raises(GpuperfAssertionError) as info:
        judge(SPEEDUP, "<=", 1.2, JudgeContext(observer=seen.append))
    assert str(info.value) == (
        "speedup at most 1.2 expected, but median 1.5, 95% CI [1.3, 1.7] from 12 paired rounds; "
        "the whole interval is on the wrong side"
    )
    assert [(c.relation, c.bound, c.outcome, c.message) for c in seen] == [("<=", "1.2", "fail", str(info.value))]


def test_a_straddled_bound_warns_or_fails_as_the_context_says() -> None:
    with pytest.warns(InconclusiveWarning) as caught:
        check = judge(SPEEDUP, ">=", 1.5)
    assert check.outcome == "inconclusive"
    assert str(caught[0].message) == (
        "speedup at least 1.5 is inconclusive: the interval straddles the bound; median 1.5, 95% CI [1.3, 1.7] "
        "from 12 paired rounds. Measure longer (--gpuperf-max-time) for a verdict, "
        "or set --gpuperf-inconclusive=fail to fail on this"
    )
    with pytest.raises(GpuperfAssertionError, match=r"straddles the bound; .* for a verdict$"):
        judge(SPEEDUP, ">=", 1.5, JudgeContext(inconclusive="fail"))


def test_the_estimate_says_where_it_comes_from_and_the_context_how_values_read() -> None:
    """A measurement's estimate: its subject starts the message, its evidence and stop reason are told."""
    latency = Estimate(
        "latency",
        0.01,
        0.009,
        0.011,
        0.96,
        20,
        nominal=0.95,
        counted="samples",
        evidence="from 20 samples x 4 calls on cpu (Test CPU)",
        subject="test_x[cpu]",
        stopped="time cap 5 s reached",
    )
    in_ms = JudgeContext(fmt=lambda seconds: f"{seconds * 1e3:g} ms")
    with pytest.warns(InconclusiveWarning) as caught:
        check = judge(latency, "<=", 0.01, in_ms)
    assert check.what == "latency" and check.bound == "10 ms"  # the subject is the record's, not the check's
    assert str(caught[0].message).startswith(
        "test_x[cpu]: latency at most 10 ms is inconclusive: the interval straddles the bound; median 10 ms, "
        "95% CI [9 ms, 11 ms] from 20 samples x 4 calls on cpu (Test CPU); sampling stopped: time cap 5 s reached. "
    )


@pytest.mark.parametrize(("bound", "side"), [(1.1, "right"), (2.0, "wrong")])
def test_too_few_rounds_decide_nothing_wherever_the_range_lies(bound: float, side: str) -> None:
    few = Estimate("speedup", 1.5, 1.3, 1.7, 0.75, 3, nominal=0.95)
    assert few.falls_short
    with pytest.warns(InconclusiveWarning) as caught:
        assert judge(few, ">=", bound).outcome == "inconclusive"
    assert str(caught[0].message) == (
        f"speedup at least {bound:g} is inconclusive: only 3 paired rounds, and a distribution-free 95% interval of "
        f"the median needs at least 6; median 1.5, the 75% interval [1.3, 1.7] from 3 paired rounds, on the {side} "
        "side of the bound. Take at least 6 paired rounds (--gpuperf-min-samples=6 and a --gpuperf-max-time long "
        "enough) for a verdict, or set --gpuperf-inconclusive=fail to fail on this"
    )
    with pytest.raises(GpuperfAssertionError, match="inconclusive: only 3 paired rounds"):
        judge(few, ">=", bound, JudgeContext(inconclusive="fail"))


def test_one_sample_is_a_point_not_an_interval() -> None:
    point = Estimate("latency", 0.3, 0.3, 0.3, 0.0, 1, nominal=0.95, counted="samples", evidence="from 1 sample")
    with pytest.warns(InconclusiveWarning) as caught:
        judge(point, "<=", 0.31)
    message = str(caught[0].message)
    assert "only 1 sample, and a distribution-free 95% interval of the median needs at least 6" in message
    assert "one sample is a point, not an interval: 0.3 from 1 sample, on the right side of the bound" in message
    assert "CI" not in message and "Take at least 6 samples" in message


def test_a_percentile_says_which_and_how_many_values_its_interval_needs() -> None:
    p99 = Estimate("p99 latency", 2.0, 1.0, 3.0, 0.9, 300, nominal=0.95, counted="samples", quantile=0.99)
    assert (p99.statistic, p99.interval_of, p99.needs) == ("p99", "the 99th percentile", 368)
    with pytest.warns(
        InconclusiveWarning, match=r"only 300 samples, and a distribution-free 95% interval of the 99th "
    ):
        judge(p99, "<=", 5.0)
    assert (SPEEDUP.statistic, SPEEDUP.interval_of, SPEEDUP.needs) == ("median", "the median", 6)


@pytest.mark.parametrize("bound", [float("nan"), float("inf")])
def test_a_bound_that_is_not_finite_is_refused_before_judging(bound: float) -> None:
    seen: list[Check] = []
    with pytest.raises(ValueError, match=r"^speedup >= bound: the bound must be a finite number"):
        judge(SPEEDUP, ">=", bound, JudgeContext(observer=seen.append))
    assert seen == []


def test_expect_estimate_takes_exactly_one_bound_by_name() -> None:
    assert expect_estimate(SPEEDUP, at_least=1.1).outcome == "pass"
    with pytest.raises(GpuperfAssertionError, match=r"speedup at most 1\.2 expected"):
        expect_estimate(SPEEDUP, at_most=1.2)
    with pytest.raises(ValueError, match="speedup: give exactly one of at_least= or at_most="):
        expect_estimate(SPEEDUP, at_least=1.1, at_most=2.0)
    with pytest.raises(ValueError, match=r"^speedup: at_most=nan: the bound must be a finite number, such as at_most="):
        expect_estimate(SPEEDUP, at_most=float("nan"))


# ---------------------------------------------------------------- where an InconclusiveWarning points


def _straddled() -> None:
    """A helper (such as gpuperf.expect) that calls expect_estimate, for its caller's line."""
    expect_estimate(SPEEDUP, at_least=1.5, stacklevel=2)


def _where(call: Callable[[], object]) -> tuple[str, int]:
    """The file and line an InconclusiveWarning from ``call`` points at."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    (warning,) = caught
    assert warning.category is InconclusiveWarning
    return warning.filename, warning.lineno


def test_an_inconclusive_warning_points_at_the_line_that_asked_for_the_check() -> None:
    m = make_measurement("t", [0.3, 0.31, 0.32], iterations=4)
    calls = make_measurement("t", [1e-3] * 20, single_calls=True)
    asks: list[Callable[[], object]] = [
        lambda: m.assert_latency(at_most="0.31 s"),
        lambda: m.assert_throughput(at_least="1 GFLOP/s"),
        lambda: calls.assert_latency(at_most="1 s", percentile=99),
        lambda: judge(SPEEDUP, ">=", 1.5),
        lambda: expect_estimate(SPEEDUP, at_least=1.5),
        # stacklevel=2 points one frame further out: at the caller of the helper that calls it.
        lambda: _straddled(),
    ]
    for ask in asks:
        assert _where(ask) == (__file__, ask.__code__.co_firstlineno)
