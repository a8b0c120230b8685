"""The smallest change a row can see (``gate.detectable``, issue 38 item 1): a planted change of the size an A/A
estimate states is found at the stated power, on both routes' intervals; fake data from a seeded generator."""

from __future__ import annotations

import math
import random
import re
import statistics
from collections.abc import Callable

import pytest

from pytest_gpuperf.gate import (
    POWER,
    Verdict,
    detectable,
    detection_target,
    estimate,
    percent,
    reason_for,
    seconds_to_see,
    tolerance_for,
    verdict_for,
)
from pytest_gpuperf.measuring import Estimate, values
from pytest_gpuperf.measuring._stats import estimate_median

SIGMA = 0.03  # run-to-run (stored route) or round-to-round (ab) noise, in log units


def _stored(rng: random.Random, runs: tuple[int, int], change: float) -> Estimate:
    base = [rng.gauss(0.0, SIGMA) for _ in range(runs[0])]
    head = [rng.gauss(math.log1p(change), SIGMA) for _ in range(runs[1])]
    return estimate(base, head, noise_floor=SIGMA)


def _paired(rng: random.Random, rounds: int, change: float) -> Estimate:
    ratios = [math.exp(rng.gauss(math.log1p(change), SIGMA)) for _ in range(rounds)]
    return estimate_median("time ratio head/base", ratios)


ROUTES: dict[str, Callable[[random.Random, float], Estimate]] = {
    "stored, 3 baseline runs and 3 current": lambda rng, change: _stored(rng, (3, 3), change),
    "stored, 1 run a side": lambda rng, change: _stored(rng, (1, 1), change),
    "ab, 20 paired rounds": lambda rng, change: _paired(rng, 20, change),
    "ab, 60 paired rounds": lambda rng, change: _paired(rng, 60, change),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_planted_change_of_the_stated_size_is_found_at_the_stated_power(route: str) -> None:
    """Each A/A trial states what it could see; a change of their mean size, planted, is significant in about
    ``POWER`` of trials (80%). Stating the interval's half-width instead (no power term) would find it in half.
    (The mean: ab's stated sizes vary with the serial widening of its interval, and their median falls on one of
    the few widths 20 rounds' order statistics give.)"""
    draw, rng, trials = ROUTES[route], random.Random(38), 1000
    stated = [detectable(draw(rng, 0.0)) for _ in range(trials)]
    size = statistics.mean(s for s in stated if s is not None)
    found = sum(draw(rng, size).low > 1.0 for _ in range(trials)) / trials
    assert POWER - 0.08 <= found <= POWER + 0.08, (route, size, found)


def test_what_a_row_can_see_follows_its_interval() -> None:
    # the normal's quantiles where the interval has no degrees of freedom: half-width q*se, seen at (q + q_power)*se
    est = Estimate("r", 1.0, math.exp(-0.0392), math.exp(0.0392), 0.95, 40)
    assert detectable(est) == pytest.approx(math.expm1(0.0392 / 1.96 * (1.96 + 0.8416)), rel=1e-3)
    assert detectable(est, power=0.9) == pytest.approx(math.expm1(0.0392 / 1.96 * (1.96 + 1.2816)), rel=1e-3)
    assert detectable(Estimate("r", 1.0, 1.0, 1.0, 0.95, 40)) == 0.0  # no noise at all: any change is seen
    wide = Estimate("r", 1.0, 0.9, 1.1, 0.95, 6, df=2.0)
    seen = detectable(wide)
    assert seen is not None and math.log1p(seen) > math.log(1.1 / 0.9) / 2  # past the interval's own half-width
    too_few = Estimate("r", 1.3, 1.1, 1.5, 0.75, 3, nominal=0.95)  # 3 paired rounds cannot give 95%
    assert detectable(too_few) is None
    with pytest.raises(ValueError, match=r"power=1\.0 must be at least 0\.5 and below 1"):
        detectable(est, power=1.0)


def _interval(half: float, value: float = 1.0, df: float | None = None) -> Estimate:
    """An estimate of ``value`` whose 95% interval's half-width is ``half`` in log units."""
    return Estimate("r", value, value * math.exp(-half), value * math.exp(half), 0.95, 40, df=df)


def test_unchanged_is_claimed_only_where_the_row_can_see_the_tolerance() -> None:
    """Issue 38 item 1: a row within the tolerance is unchanged only where its evidence can see a change of the
    tolerance; else it is inconclusive and says what it can see."""
    sharp, blurred = _interval(0.02), _interval(0.06)  # can see 2.9% and 9.0%
    assert verdict_for(sharp, 0.05) is Verdict.UNCHANGED
    assert verdict_for(blurred, 0.05) is Verdict.INCONCLUSIVE  # the old rule (rule out 10%) called it unchanged
    seen = detectable(blurred)
    assert seen is not None and 0.05 < seen < 0.10
    reason = reason_for(Verdict.INCONCLUSIVE, blurred, 0.05, noise="40 paired rounds", remedy="raise --max-time")
    assert (
        reason
        == f"+0.0%: inconclusive at 5%, this test can see >= {percent(seen)} (40 paired rounds); raise --max-time"
    )
    assert verdict_for(blurred, seen) is Verdict.UNCHANGED  # a tolerance it can see
    assert verdict_for(_interval(0.02, 1.2), 0.05) is Verdict.SLOWER  # significant and over: slower, seen or not
    assert verdict_for(_interval(0.3, 1.2), 0.05) is Verdict.INCONCLUSIVE


def test_an_auto_tolerance_is_what_the_row_can_see_never_under_its_floor() -> None:
    """Issue 38 item 2: under ``auto`` a row's tolerance is max(its smallest detectable change, the floor)."""
    blurred, sharp = _interval(0.06), _interval(0.005)
    seen = detectable(blurred)
    assert seen is not None
    assert tolerance_for(values.AutoTolerance(), blurred) == seen
    assert tolerance_for(values.AutoTolerance(), sharp) == 0.02  # it sees 0.7%; the floor holds
    assert tolerance_for(values.AutoTolerance(0.03), sharp) == 0.03
    assert tolerance_for(0.05, blurred) == 0.05  # a fixed one is the one given
    too_few = Estimate("r", 1.3, 1.1, 1.5, 0.75, 3, nominal=0.95)
    assert tolerance_for(values.AutoTolerance(), too_few) == 0.02  # it sees nothing: the floor, and inconclusive
    assert verdict_for(blurred, tolerance_for(values.AutoTolerance(), blurred)) is Verdict.UNCHANGED


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("5%", 0.05),
        ("0.02", 0.02),
        ("auto", values.AutoTolerance()),
        (" AUTO ", values.AutoTolerance()),
        ("auto:3%", values.AutoTolerance(0.03)),
        ("auto:0.1", values.AutoTolerance(0.1)),
    ],
)
def test_a_tolerance_is_a_fraction_or_auto_with_an_optional_floor(written: str, read: object) -> None:
    assert values.tolerance(written) == read
    # what a file stores reads back, and what the option is written as parses to it again (confirmation runs)
    assert values.stored_tolerance(values.tolerance_json(values.tolerance(written))) == read
    assert values.tolerance(str(read) if isinstance(read, values.AutoTolerance) else read) == read


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("fast", "is not a number; write a fraction such as 0.01 or a percentage such as 1%; or auto, or auto:3%"),
        ("auto:", "the floor after auto: is not a number"),
        ("auto:0", "the floor after auto: must be between 0 and 1"),
        ("150%", "must be between 0 and 1 (exclusive)"),
    ],
)
def test_a_bad_tolerance_says_how_to_write_one(written: str, says: str) -> None:
    with pytest.raises(values.SettingError, match=re.escape(says)):
        values.tolerance(written)


@pytest.mark.parametrize("goal", [0.01, 0.03, 0.1])
def test_the_detection_target_is_the_half_width_that_sees_the_goal(goal: float) -> None:
    """``ab --detect``'s stop rule target inverts ``detectable`` (many rounds: the normal's quantiles)."""
    half = detection_target(goal)
    est = Estimate("r", 1.0, math.exp(-half), math.exp(half), 0.95, 1000, nominal=0.95)
    assert detectable(est) == pytest.approx(goal)
    assert seconds_to_see(2 * goal, goal, 10.0) == pytest.approx(10.0 * (math.log1p(2 * goal) / math.log1p(goal)) ** 2)
