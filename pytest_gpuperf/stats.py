"""Robust statistics of timing samples: median, quartiles, a distribution-free CI of the median.

Timings are skewed (a floor and a long tail of interruptions), so everything here
is order-statistic based; nothing assumes a normal distribution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

__all__ = ["Interval", "Summary", "binomial_cdf", "median_ci", "median_ci_ranks", "summarize", "t_quantile"]


@dataclass(frozen=True)
class Interval:
    """A confidence interval; ``confidence`` is the coverage actually achieved (order statistics are discrete)."""

    low: float
    high: float
    confidence: float

    def relative_half_width(self, center: float) -> float:
        if center == 0:
            return math.inf
        return (self.high - self.low) / 2.0 / abs(center)

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    stdev: float
    ci: Interval

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def cv(self) -> float:
        """Coefficient of variation (stdev / mean)."""
        return self.stdev / self.mean if self.mean else math.inf


def binomial_cdf(k: int, n: int, p: float = 0.5) -> float:
    """P(X <= k) for X ~ Binomial(n, p), computed in log space so large n does not overflow."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_pmf = (
        np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(k + 1)])
        + np.arange(k + 1) * math.log(p)
        + (n - np.arange(k + 1)) * math.log1p(-p)
    )
    top = float(log_pmf.max())
    return float(min(1.0, math.exp(top) * np.exp(log_pmf - top).sum()))


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, float]:
    """0-based ranks (lo, hi) of the order statistics bounding the median, and their exact coverage.

    The number of samples below the true median is Binomial(n, 1/2) whatever the
    distribution, so ``[x_(j), x_(n-1-j)]`` covers it with probability
    ``1 - 2 P(B <= j)``. We take the narrowest symmetric pair whose coverage is
    at least ``confidence``; with too few samples (n < 6 at 95%) no pair reaches it
    and the full range is returned with its lower coverage.
    """
    if n < 1:
        raise ValueError("need at least one sample")
    alpha = 1.0 - confidence
    # x_(j) lies above the median when at most j samples fall below it: P(B <= j).
    # Largest j with 2*P(B <= j) <= alpha; start from the normal-theory value.
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    j = min(max(0, math.floor(n / 2 - z * math.sqrt(n) / 2) + 2), (n - 1) // 2)
    while j > 0 and 2.0 * binomial_cdf(j, n) > alpha:
        j -= 1
    while j + 1 <= (n - 1) // 2 and 2.0 * binomial_cdf(j + 1, n) <= alpha:
        j += 1
    coverage = 1.0 - 2.0 * binomial_cdf(j, n)
    return j, n - 1 - j, coverage


def median_ci(samples: Sequence[float] | np.ndarray, confidence: float = 0.95) -> Interval:
    """Distribution-free confidence interval of the median (order statistics, binomial coverage)."""
    data = np.sort(np.asarray(samples, dtype=np.float64))
    lo, hi, coverage = median_ci_ranks(len(data), confidence)
    return Interval(float(data[lo]), float(data[hi]), coverage)


def summarize(samples: Sequence[float] | np.ndarray, confidence: float = 0.95) -> Summary:
    data = np.asarray(samples, dtype=np.float64)
    if data.size == 0:
        raise ValueError("no samples to summarize")
    q1, median, q3 = np.quantile(data, [0.25, 0.5, 0.75])
    return Summary(
        n=int(data.size),
        median=float(median),
        mean=float(data.mean()),
        minimum=float(data.min()),
        maximum=float(data.max()),
        q1=float(q1),
        q3=float(q3),
        stdev=float(data.std(ddof=1)) if data.size > 1 else 0.0,
        ci=median_ci(data, confidence),
    )


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t distribution with ``df`` degrees of freedom (``df=inf`` is the normal).

    Exact for df 1 and 2; otherwise the Cornish-Fisher expansion in 1/df (Abramowitz and
    Stegun 26.7.5): within 1% of the exact value at df 3, 0.1% from df 5 (two-sided 99% and below).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p={p!r} must be strictly between 0 and 1")
    if not df > 0:
        raise ValueError(f"df={df!r} must be positive")
    if math.isinf(df):
        return NormalDist().inv_cdf(p)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2.0 * p - 1.0) / math.sqrt(2.0 * p * (1.0 - p))
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4.0
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96.0
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384.0
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160.0
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4
