from __future__ import annotations

import math
import random
from fractions import Fraction
from math import comb

import numpy as np
import pytest

from pytest_gpuperf.measuring import median, median_ci, min_samples_for, quantile, quantile_ci, summarize
from pytest_gpuperf.measuring._stats import (
    binomial_cdf,
    estimate_median,
    median_ci_ranks,
    quantile_ci_ranks,
    serial_factor,
    serial_median_ci,
    trend,
)


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


# ---------------------------------------------------------------- quantiles


def _exact_cdf(k: int, n: int, q: Fraction) -> Fraction:
    return sum((comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1)), Fraction(0))


@pytest.mark.parametrize(("n", "q"), [(40, "9/10"), (120, "9/10"), (400, "99/100"), (700, "99/100"), (50, "1/4")])
def test_quantile_ranks_keep_each_side_within_alpha_half_exactly(n: int, q: str) -> None:
    """The binomial sum, in exact arithmetic: each side misses with at most 2.5%, and no narrower pair would."""
    fq = Fraction(q)
    lo, hi, confidence = quantile_ci_ranks(n, float(fq), 0.95)
    below = _exact_cdf(lo, n, fq)  # x_(lo) above the quantile: at most lo samples below it
    above = 1 - _exact_cdf(hi, n, fq)  # x_(hi) below the quantile: at least hi + 1 samples below it
    assert below <= Fraction(1, 40) and above <= Fraction(1, 40)
    assert _exact_cdf(lo + 1, n, fq) > Fraction(1, 40)  # lo + 1 would miss more often
    assert 1 - _exact_cdf(hi - 1, n, fq) > Fraction(1, 40)  # and so would hi - 1
    assert confidence == pytest.approx(float(1 - 2 * max(below, above)), abs=1e-12)
    assert 1 - below - above >= Fraction(95, 100)  # the two-sided coverage itself


def test_a_99th_percentile_at_95_percent_needs_368_samples() -> None:
    # Two-sided, 2.5% per side: 0.99**n <= 0.025 from n = 368 (one-sided 5% would take 299: 0.99**299 < 0.05).
    assert min_samples_for(0.95, 0.99) == 368
    assert 0.99**367 > 0.025 >= 0.99**368 and 0.99**298 > 0.05 >= 0.99**299
    assert [min_samples_for(0.95, q) for q in (0.5, 0.9, 0.01)] == [6, 36, 368]
    assert min_samples_for(0.95, 0.5) == min_samples_for(0.95)
    short = quantile_ci_ranks(367, 0.99, 0.95)
    assert short[:2] == (0, 366) and short[2] < 0.95  # the full range, called short: no fake interval
    assert quantile_ci_ranks(368, 0.99, 0.95)[2] >= 0.95
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        min_samples_for(0.95, 1.0)


def test_the_median_is_the_half_quantile() -> None:
    for n in (1, 5, 6, 20, 101, 1000):
        assert median_ci_ranks(n, 0.95) == quantile_ci_ranks(n, 0.5, 0.95)


def test_quantile_interval_covers_a_known_quantile_as_claimed() -> None:
    """Exponential samples (true p90 = ln 10): the interval misses it about as often as it may, no more."""
    rng = random.Random(7)
    truth = math.log(10.0)
    trials, n = 2000, 100
    high_misses = low_misses = 0
    for _ in range(trials):
        ci = quantile_ci([rng.expovariate(1.0) for _ in range(n)], 0.9, 0.95)
        assert ci.confidence >= 0.95
        low_misses += ci.low > truth
        high_misses += ci.high < truth
    # Each side may miss 2.5% of the time; 2000 trials put 3 standard errors at about 1%.
    assert low_misses / trials < 0.036 and high_misses / trials < 0.036


def test_binomial_cdf_of_a_far_tail_is_exact_and_cheap() -> None:
    fq = Fraction(99, 100)
    for k in (480, 490, 495, 499):
        assert binomial_cdf(k, 500, 0.99) == pytest.approx(float(_exact_cdf(k, 500, fq)), rel=1e-9, abs=1e-300)
    lo, hi, confidence = quantile_ci_ranks(1_000_000, 0.99, 0.95)  # a few standard deviations of terms
    assert lo < 990_000 < hi and confidence >= 0.95


def test_quantile_interpolates_like_numpy() -> None:
    data = [float(x) for x in range(1, 101)]
    assert quantile(data, 0.99) == pytest.approx(99.01)
    assert quantile(data, 0.5) == median(data)


def _bursty(rng: random.Random, n: int, shift: float, stay: float, sigma: float = 0.02) -> list[float]:
    """Per-round ratios of an unchanged step (true median 1) under a load that comes in bursts: each round keeps
    the last one's state (ratio shifted by +-``shift``, log units) with probability ``stay``, else draws it anew."""
    state, out = rng.choice((-shift, shift)), []
    for _ in range(n):
        if rng.random() > stay:
            state = rng.choice((-shift, shift))
        out.append(math.exp(state + rng.gauss(0.0, sigma)))
    return out


def _coverage(intervals: list[tuple[float, float]]) -> float:
    return sum(low <= 1.0 <= high for low, high in intervals) / len(intervals)


def test_rounds_in_bursts_widen_the_interval_to_its_coverage() -> None:
    """Issue 38 item 5: bursts of load longer than a round cluster the rounds' ratios, and the interval of
    independent draws covers the true median in 87% of runs, not 95%; the serial one widens for it (planted)."""
    rng = random.Random(5)
    runs = [_bursty(rng, 40, 0.02, 0.5) for _ in range(1000)]
    independent = [(ci.low, ci.high) for ci in map(median_ci, runs)]
    serial = [(ci.low, ci.high) for ci, _ in map(serial_median_ci, runs)]
    assert _coverage(independent) < 0.89
    assert _coverage(serial) >= 0.9
    worth = [serial_median_ci(run)[1] for run in runs]
    assert 20 < sum(worth) / len(worth) < 38  # 40 rounds worth about 31 independent ones


def test_independent_rounds_keep_their_coverage_at_a_small_cost_in_width() -> None:
    rng = random.Random(6)
    runs = [[math.exp(rng.gauss(0.0, 0.02)) for _ in range(40)] for _ in range(1000)]
    plain, serial = [median_ci(run) for run in runs], [serial_median_ci(run)[0] for run in runs]
    assert _coverage([(ci.low, ci.high) for ci in serial]) >= 0.95
    widths = [math.log(b.high / b.low) / math.log(a.high / a.low) for a, b in zip(plain, serial, strict=True)]
    assert min(widths) >= 1.0 and sum(widths) / len(widths) < 1.15  # never narrower; about 9% wider on average
    assert sum(w == 1.0 for w in widths) > 500  # most runs show no clustering: median_ci's own interval


def test_a_trend_across_the_rounds_is_worth_few_independent_ones() -> None:
    drifting = [1.0 + i / 100 for i in range(21)]
    assert serial_factor(drifting) > 3.0
    ci, worth = serial_median_ci(drifting)
    # worth 6: the whole range, a 96.9% interval of 6 independent values, where 21 would give [1.05, 1.15]
    assert 6 <= worth < 7 and (ci.low, ci.high) == (1.0, 1.2) and ci.confidence == 1 - 2 / 2**6
    assert median_ci(drifting).high < 1.16
    est = estimate_median("time ratio", drifting)
    assert est.worth == worth and est.low == 1.0
    assert f"21 paired rounds, clustered: worth {worth:.0f} independent" in str(est)


def test_rounds_without_runs_about_the_median_are_median_ci_exactly() -> None:
    alternating = [1.0 + (0.01 if i % 2 else -0.01) * (1 + i / 50) for i in range(30)]
    assert serial_factor(alternating) == 1.0  # anti-correlated: never narrowed below independent draws
    ci, worth = serial_median_ci(alternating)
    assert worth == 30 and ci == median_ci(alternating)
    assert serial_factor([1.0, 2.0]) == 1.0 and serial_factor([1.0] * 10) == 1.0
