"""Robust statistics of timing samples: median, quartiles, distribution-free CIs of the median and of any quantile.

Timings are skewed (a floor and a long tail of interruptions), so everything here
is order-statistic based; nothing assumes a normal distribution. Pure Python: the
plugin is imported at every pytest start, and numpy alone would cost more than the
rest of the plugin together.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

__all__ = [
    "Estimate",
    "Interval",
    "Summary",
    "Trend",
    "binomial_cdf",
    "counted_as",
    "estimate_median",
    "format_coverage",
    "median",
    "median_ci",
    "median_ci_ranks",
    "min_samples_for",
    "quantile",
    "quantile_ci",
    "quantile_ci_ranks",
    "serial_factor",
    "serial_median_ci",
    "summarize",
    "t_quantile",
    "t_two_sided_p",
    "trend",
]


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

    def falls_short(self, nominal: float) -> bool:
        """Is this interval's coverage below ``nominal`` (too few samples for the confidence asked for)?"""
        return _short(self.confidence, nominal)


def _short(achieved: float, nominal: float) -> bool:
    return achieved < nominal - 1e-12


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval: the one type for ratios, speedups, efficiencies, and what
    the interval judge (``_judge.py``) judges.

    ``value`` is the median of per-round values (paired rounds, ``ab``) or the ratio of the
    geometric means of runs (the stored-baseline gate); ``count`` is how many rounds or runs
    it comes from. The gate also keeps the run-to-run ``spread`` (log units, about relative)
    and the degrees of freedom ``df`` its interval used. ``nominal`` is the confidence asked
    for where it may differ from the one achieved: an order-statistic interval from fewer
    values than ``min_samples_for(nominal)`` covers less (see ``falls_short``).

    The rest says where the estimate comes from, as the judge's messages tell it: what
    ``count`` counts (``counted``), the quantile a percentile estimates (``quantile``; None:
    the median), the evidence (``from 20 samples x 4 calls on cpu (...)``; None: the count),
    whose estimate it is (``subject``, a measurement's name) and why its sampling stopped
    (``stopped``, told when the interval decides nothing).
    """

    what: str
    value: float
    low: float
    high: float
    confidence: float
    count: int
    spread: float | None = None
    df: float | None = None
    nominal: float | None = None
    counted: str = "paired rounds"
    quantile: float | None = None
    evidence: str | None = None
    subject: str | None = None
    stopped: str | None = None
    #: what ``count`` values in order are worth as independent ones (``serial_median_ci``): below ``count`` where
    #: consecutive rounds clustered and the interval was widened for it; None: not assessed
    worth: float | None = None

    @property
    def asked(self) -> float:
        """The confidence asked for (``nominal``, or the one achieved where none was named)."""
        return self.confidence if self.nominal is None else self.nominal

    @property
    def falls_short(self) -> bool:
        """Too few values for the confidence asked for: the interval covers less, and decides nothing."""
        return self.nominal is not None and _short(self.confidence, self.nominal)

    @property
    def significant(self) -> bool:
        """Does the interval exclude 1 (for a ratio: is there a change at all)? Never from too few values."""
        return not self.falls_short and (self.low > 1.0 or self.high < 1.0)

    @property
    def statistic(self) -> str:
        """What ``value`` is: ``median``, or a percentile such as ``p99``."""
        return "median" if self.quantile is None else f"p{self.quantile * 100:g}"

    @property
    def interval_of(self) -> str:
        """What the interval bounds: ``the median``, ``the 99th percentile``."""
        return "the median" if self.quantile is None else f"the {ordinal(self.quantile * 100)} percentile"

    @property
    def needs(self) -> int:
        """How many values an interval of this statistic needs at the confidence asked for (6 for a 95% median)."""
        return min_samples_for(self.asked, 0.5 if self.quantile is None else self.quantile)

    @property
    def rounds(self) -> str:
        """``12 paired rounds``, or where they clustered ``40 paired rounds, clustered: worth 12 independent``."""
        counted = counted_as(self.count, self.counted)
        if self.worth is None or self.worth > self.count - 0.5:
            return counted
        return f"{counted}, clustered: worth {self.worth:.0f} independent"

    @property
    def source(self) -> str:
        """Where the interval comes from: ``evidence``, or ``from 12 paired rounds``."""
        return f"from {self.rounds}" if self.evidence is None else self.evidence

    def __str__(self) -> str:
        rounds = self.rounds
        if self.falls_short:
            return (
                f"{self.what} {self.value:.3g} (only {rounds}: their range [{self.low:.3g}, {self.high:.3g}] "
                f"covers {format_coverage(self.confidence)}, short of the {self.nominal:.0%} asked for)"
            )
        interval = f"{self.confidence:.0%} CI [{self.low:.3g}, {self.high:.3g}]"
        return f"{self.what} {self.value:.3g} ({interval} from {rounds})"


def counted_as(count: int, counted: str) -> str:
    """``3 samples``, ``1 sample``, ``1 paired round``."""
    return f"{count} {counted[:-1] if count == 1 and counted.endswith('s') else counted}"


def ordinal(number: float) -> str:
    """``99th``, ``50th``, ``99.9th``, ``1st``, ``2nd``, ``3rd``, ``11th``."""
    if number != int(number):
        return f"{number:g}th"
    n = int(number)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_coverage(fraction: float) -> str:
    """A coverage as a percentage without false rounding: 93.75%, 87.5%, 50%, 0%."""
    return f"{fraction * 100:.4g}%"


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
    """P(X <= k) for X ~ Binomial(n, p), computed in log space so large n does not overflow.

    The terms are summed from ``k`` away from the mode until they no longer count, on the
    side of ``k`` that is a tail: a few standard deviations of terms, not ``k`` of them,
    so that the ranks of a 99th percentile's interval from a million samples stay cheap.
    """
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    if k <= n * p:
        return min(1.0, _tail_sum(k, n, p, -1))
    return max(0.0, 1.0 - _tail_sum(k + 1, n, p, +1))


def _tail_sum(start: int, n: int, p: float, step: int) -> float:
    """The sum of Binomial(n, p) probabilities from ``start`` outward (``step`` -1: down to 0, +1: up to n)."""
    log_n = math.lgamma(n + 1)
    log_p, log_q = math.log(p), math.log1p(-p)
    terms: list[float] = []
    i = start
    while 0 <= i <= n:
        term = log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        terms.append(term)
        # Terms fall faster than geometrically away from the mode: 40 nats below the first is far past double precision.
        if term < terms[0] - 40.0 and len(terms) > 1:
            break
        i += step
    top = max(terms)
    return math.exp(top) * math.fsum(math.exp(t - top) for t in terms)


@lru_cache(maxsize=4096)
def quantile_ci_ranks(n: int, q: float, confidence: float = 0.95) -> tuple[int, int, float]:
    """0-based ranks (lo, hi) of the order statistics bounding the ``q`` quantile, and the confidence they keep.

    The number of samples at or below the true ``q`` quantile is Binomial(n, q) whatever the
    (continuous) distribution, so ``x_(lo)`` lies above it with probability ``P(B <= lo)`` and
    ``x_(hi)`` below it with probability ``P(B >= hi + 1)``. Each side may miss with at most
    ``(1 - confidence) / 2``, as a two-sided interval of the median does: ``lo`` is the
    highest rank and ``hi`` the lowest that keep that. The confidence returned is
    ``1 - 2 * (the larger miss)``, which is at least ``confidence`` when both sides keep it.
    With fewer samples than ``min_samples_for(confidence, q)`` (368 for a 99th percentile at
    95%) one side cannot keep it: the full range is returned with its lower confidence, and
    the judge and the reports call it too short to decide anything (it is no interval).
    """
    if n < 1:
        raise ValueError("need at least one sample")
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile q={q!r} must be strictly between 0 and 1")
    half = (1.0 - confidence) / 2.0
    spread = NormalDist().inv_cdf(1.0 - half) * math.sqrt(n * q * (1.0 - q))
    lo = min(max(0, math.floor(n * q - spread)), n - 1)
    while lo > 0 and binomial_cdf(lo, n, q) > half:
        lo -= 1
    while lo + 1 <= n - 1 and binomial_cdf(lo + 1, n, q) <= half:
        lo += 1
    hi = min(max(0, math.ceil(n * q + spread)), n - 1)

    def above(rank: int) -> float:  # P(B >= rank + 1): x_(rank) lies below the quantile
        return binomial_cdf(n - rank - 1, n, 1.0 - q)

    while hi < n - 1 and above(hi) > half:
        hi += 1
    while hi - 1 >= lo and above(hi - 1) <= half:
        hi -= 1
    miss = max(binomial_cdf(lo, n, q), above(hi))
    if _short(1.0 - 2.0 * miss, confidence):
        lo, hi, miss = 0, n - 1, max(q, 1.0 - q) ** n
    return lo, hi, max(0.0, 1.0 - 2.0 * miss)


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, float]:
    """0-based ranks (lo, hi) of the order statistics bounding the median, and their exact coverage.

    The number of samples below the true median is Binomial(n, 1/2) whatever the
    distribution, so ``[x_(j), x_(n-1-j)]`` covers it with probability
    ``1 - 2 P(B <= j)``: the narrowest symmetric pair whose coverage is at least
    ``confidence`` (``quantile_ci_ranks`` at one half). With too few samples (fewer than
    ``min_samples_for``: 6 at 95%) no pair reaches it and the full range is returned with
    its lower coverage (0 for one sample: a point is no interval). The judge and the
    reports call such an interval too short to decide anything.
    """
    return quantile_ci_ranks(n, 0.5, confidence)


@lru_cache(maxsize=64)
def min_samples_for(confidence: float, q: float = 0.5) -> int:
    """The fewest samples whose range bounds the ``q`` quantile with ``confidence`` on each side, as
    ``quantile_ci_ranks`` asks: 6 at 95% for the median (8 at 99%), 36 for a 90th percentile, 368 for a 99th.

    The range of n samples misses the ``q`` quantile from above when all n fall below it
    (probability ``q**n``), from below when all fall above it (``(1 - q)**n``), whatever
    the distribution; each must be at most ``(1 - confidence) / 2``. (A one-sided bound
    needs fewer: ``q**n <= 1 - confidence``, 299 samples for a 99th percentile at 95%.)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must be strictly between 0 and 1")
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile q={q!r} must be strictly between 0 and 1")
    worse = max(q, 1.0 - q)
    n = max(1, math.floor(math.log((1.0 - confidence) / 2.0) / math.log(worse)) - 1)
    while _short(1.0 - 2.0 * worse**n, confidence):
        n += 1
    return n


def _sorted(samples: Iterable[float]) -> list[float]:
    data = sorted(float(x) for x in samples)
    if not data:
        raise ValueError("no samples to summarize")
    return data


def _quantile(data: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics of sorted ``data`` (numpy's default method)."""
    position = q * (len(data) - 1)
    below = math.floor(position)
    above = min(below + 1, len(data) - 1)
    return data[below] + (data[above] - data[below]) * (position - below)


def quantile(samples: Iterable[float], q: float) -> float:
    """The ``q`` quantile, interpolated between order statistics (numpy's default): ``quantile(xs, 0.99)``."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q={q!r} must be between 0 and 1")
    return _quantile(_sorted(samples), q)


def quantile_ci(samples: Iterable[float], q: float, confidence: float = 0.95) -> Interval:
    """Distribution-free confidence interval of the ``q`` quantile (order statistics, binomial coverage)."""
    data = _sorted(samples)
    lo, hi, coverage = quantile_ci_ranks(len(data), q, confidence)
    return Interval(data[lo], data[hi], coverage)


def median(samples: Iterable[float]) -> float:
    """The median (the mean of the middle two for an even count): the one median of this package."""
    return _quantile(_sorted(samples), 0.5)


def median_ci(samples: Iterable[float], confidence: float = 0.95) -> Interval:
    """Distribution-free confidence interval of the median (order statistics, binomial coverage)."""
    return quantile_ci(samples, 0.5, confidence)


def summarize(samples: Iterable[float], confidence: float = 0.95) -> Summary:
    data = _sorted(samples)
    n = len(data)
    mean = math.fsum(data) / n
    stdev = math.sqrt(math.fsum((x - mean) ** 2 for x in data) / (n - 1)) if n > 1 else 0.0
    lo, hi, coverage = median_ci_ranks(n, confidence)
    return Summary(
        n=n,
        median=_quantile(data, 0.5),
        mean=mean,
        minimum=data[0],
        maximum=data[-1],
        q1=_quantile(data, 0.25),
        q3=_quantile(data, 0.75),
        stdev=stdev,
        ci=Interval(data[lo], data[hi], coverage),
    )


def serial_factor(values: Sequence[float]) -> float:
    """How much the clustering of consecutive ``values`` (in the order measured) multiplies the variance of the
    count of them below the median, against independent draws: 1 where they do not cluster (never less).

    The distribution-free interval of the median rests on that count being Binomial(n, 1/2): true for
    independent values, not when the load comes in bursts longer than one value and several values in a row
    fall on the same side. The count's variance is then ``n/4 * (1 + 2 * sum of rho_k)``, rho_k the
    autocorrelation at lag k of the values' signs about their median; this is its Bartlett-weighted estimate
    (Newey and West) over lags up to the cube root of n, rounded up, clamped at 1 so that an interval is never
    narrowed by an estimate of anti-correlation."""
    n = len(values)
    if n < 3:
        return 1.0
    centre = median(values)
    signs = [(v > centre) - (v < centre) for v in values]
    mean = math.fsum(signs) / n
    dev = [x - mean for x in signs]
    total = math.fsum(d * d for d in dev)
    if total == 0.0:
        return 1.0
    lags = math.ceil(n ** (1.0 / 3.0))
    weighted = math.fsum(
        (1.0 - k / (lags + 1)) * math.fsum(dev[i] * dev[i + k] for i in range(n - k)) / total
        for k in range(1, min(lags, n - 1) + 1)
    )
    return min(float(n), max(1.0, 1.0 + 2.0 * weighted))


def serial_median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[Interval, float]:
    """The median's interval from ``values`` in the order measured, and what they are worth as independent ones.

    Where consecutive values cluster (``serial_factor`` f above 1), the n values count as n/f independent ones:
    the ranks of ``median_ci`` for that many, scaled back to n values (the rank's distance from the middle grows
    by sqrt(f), as the count's standard deviation does), and an interval that falls short where n/f values
    could not give one. Where they do not cluster this is ``median_ci`` exactly. Checked by planting bursts of
    load in ``tests/measuring/test_stats.py``."""
    data = _sorted(values)
    n = len(data)
    factor = serial_factor(values)
    worth = n / factor
    if factor == 1.0:
        lo, hi, coverage = median_ci_ranks(n, confidence)
        return Interval(data[lo], data[hi], coverage), worth
    m = max(1, math.floor(worth))
    lo_m, _, coverage = median_ci_ranks(m, confidence)
    if _short(coverage, confidence):
        return Interval(data[0], data[-1], coverage), worth
    lo = min(math.floor(lo_m * n / m), (n - 1) // 2)
    return Interval(data[lo], data[n - 1 - lo], coverage), worth


def estimate_median(what: str, values: Iterable[float], confidence: float = 0.95) -> Estimate:
    """The median of per-round ``values`` in the order measured (non-finite ones dropped) with its
    distribution-free interval, widened where consecutive rounds cluster (``serial_median_ci``)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        raise ValueError(f"{what}: no finite per-round values to estimate from")
    ci, worth = serial_median_ci(finite, confidence)
    return Estimate(what, median(finite), ci.low, ci.high, ci.confidence, len(finite), nominal=confidence, worth=worth)


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


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t statistic ``t`` with ``df`` degrees of freedom: P(|T| >= |t|), through the
    regularized incomplete beta function (exact to rounding, unlike ``t_quantile``'s expansion)."""
    if not df > 0:
        raise ValueError(f"df={df!r} must be positive")
    return _incomplete_beta(df / 2, 0.5, df / (df + t * t))


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Numerical Recipes' continued fraction, by Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    return front * _beta_fraction(a, b, x) / a


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


#: Trend tests look at no more than this many samples (evenly spaced): the test is quadratic in them.
TREND_POINTS = 400


@dataclass(frozen=True)
class Trend:
    """A monotone trend across samples in time order: Mann-Kendall's test and the size of the change."""

    #: median of the last third of the samples over the median of the first third, minus 1 (+0.086: 8.6% slower)
    change: float
    #: two-sided p-value of Mann-Kendall's S (no trend: S near 0)
    p_value: float
    count: int


def trend(samples: Sequence[float]) -> Trend:
    """Is there a monotone trend in ``samples`` (taken in time order), and how large is it over the run?"""
    n = len(samples)
    if n < 9:
        return Trend(0.0, 1.0, n)
    points = (
        [samples[round(i * (n - 1) / (TREND_POINTS - 1))] for i in range(TREND_POINTS)]
        if n > TREND_POINTS
        else list(samples)
    )
    m = len(points)
    s = 0
    for i in range(m - 1):
        x = points[i]
        for y in points[i + 1 :]:
            s += (y > x) - (y < x)
    variance = m * (m - 1) * (2 * m + 5) / 18.0
    z = (s - math.copysign(1, s)) / math.sqrt(variance) if s else 0.0
    p_value = 2.0 * (1.0 - NormalDist().cdf(abs(z)))
    third = max(1, n // 3)
    first, last = median(samples[:third]), median(samples[-third:])
    change = last / first - 1.0 if first > 0 else 0.0
    return Trend(change, p_value, n)
