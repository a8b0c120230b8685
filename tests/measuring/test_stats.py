from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from pytest_gpuperf.measuring import estimate_median, median_ci, min_samples_for, summarize, trend
from pytest_gpuperf.measuring._stats import binomial_cdf, median_ci_ranks


@pytest.mark.parametrize("n", [1, 2, 7, 20, 61])
def test_binomial_cdf_matches_exact_arithmetic(n: int) -> None:
    for k in range(-1, n + 1):
        exact = sum(Fraction(math.comb(n, i), 2**n) for i in range(max(k + 1, 0)))
        assert binomial_cdf(k, n) == pytest.approx(float(exact), rel=1e-9, abs=1e-300)


def test_ranks_follow_the_classic_table() -> None:
    # n=10: 2nd and 9th order statistics, 97.9% (any nonparametric statistics text).
    lo, hi, coverage = median_ci_ranks(10)
    assert (lo, hi) == (1, 8)
    assert coverage == pytest.approx(0.978515625)
    # With 5 samples no pair reaches 95%: the full range, with its lower coverage, is returned.
    lo, hi, coverage = median_ci_ranks(5)
    assert (lo, hi) == (0, 4)
    assert coverage == pytest.approx(0.9375)
    for n in (6, 11, 30, 101, 1000, 5000):
        lo, hi, coverage = median_ci_ranks(n)
        assert coverage >= 0.95
        # The narrowest: one step inward would drop below 95%.
        assert 1 - 2 * binomial_cdf(lo + 1, n) < 0.95


@pytest.mark.parametrize(
    ("name", "draw", "true_median"),
    [
        ("lognormal", lambda rng, n: rng.lognormal(0.0, 0.5, n), 1.0),
        ("exponential+floor", lambda rng, n: 2.0 + rng.exponential(1.0, n), 2.0 + math.log(2)),
        ("bimodal", lambda rng, n: np.where(rng.random(n) < 0.4, 11.7, 14.7) + rng.normal(0, 0.3, n), None),
    ],
)
@pytest.mark.parametrize("n", [12, 40, 200])
def test_interval_covers_the_true_median_at_its_nominal_rate(name: str, draw, true_median, n: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(20261122 + n)
    if true_median is None:  # estimate the bimodal median from a huge draw
        true_median = float(np.median(draw(rng, 2_000_000)))
    trials = 2000
    covered = sum(median_ci(draw(rng, n)).contains(true_median) for _ in range(trials))
    rate = covered / trials
    nominal = median_ci_ranks(n)[2]
    # Coverage is exact for any continuous distribution: the empirical rate must sit
    # within sampling error of the nominal one (4 standard errors), never well below 95%.
    se = math.sqrt(nominal * (1 - nominal) / trials)
    assert abs(rate - nominal) < 4 * se, (name, n, rate, nominal)
    assert rate > 0.95 - 4 * se


def test_summary() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0
    assert s.minimum == 1.0 and s.maximum == 100.0
    assert s.q1 == 2.0 and s.q3 == 4.0 and s.iqr == 2.0
    assert s.cv == pytest.approx(s.stdev / s.mean)
    assert s.ci.low == 1.0 and s.ci.high == 100.0
    with pytest.raises(ValueError, match="no samples"):
        summarize([])


def test_trend_sees_a_monotone_drift_and_not_noise() -> None:
    rng = random.Random(3)
    rising = [1.0 + 0.001 * i + rng.gauss(0, 0.01) for i in range(300)]
    t = trend(rising)
    assert t.p_value < 1e-6 and 0.15 < t.change < 0.25
    flat = trend([1.0 + rng.gauss(0, 0.01) for _ in range(300)])
    assert flat.p_value > 0.001 and abs(flat.change) < 0.01
    assert trend([1.0, 2.0]).p_value == 1.0  # too few samples to say


def test_the_fewest_samples_for_a_distribution_free_interval() -> None:
    # The range of n samples misses the median when all fall on one side: 2 / 2**n.
    assert [min_samples_for(c) for c in (0.5, 0.75, 0.9, 0.95, 0.99)] == [2, 3, 5, 6, 8]
    assert median_ci_ranks(1) == (0, 0, 0.0)  # one sample is a point: it covers the median with probability 0
    with pytest.raises(ValueError, match=r"confidence=1\.0 must be strictly between 0 and 1"):
        min_samples_for(1.0)


def test_an_estimate_from_too_few_rounds_says_so_and_is_never_significant() -> None:
    short = estimate_median("speedup", [1.5, 1.6, 1.7])
    assert short.falls_short and short.nominal == 0.95 and short.confidence == pytest.approx(0.75)
    assert not short.significant  # the whole range is above 1, but 3 rounds cannot say so at 95%
    assert (
        str(short)
        == "speedup 1.6 (only 3 paired rounds: their range [1.5, 1.7] covers 75%, short of the 95% asked for)"
    )
    enough = estimate_median("speedup", [1.5, 1.6, 1.7, 1.55, 1.65, 1.62])
    assert not enough.falls_short and enough.significant
    assert str(enough).endswith("97% CI [1.5, 1.7] from 6 paired rounds)")
    assert not median_ci([1.0] * 6).falls_short(0.95) and median_ci([1.0] * 5).falls_short(0.95)
