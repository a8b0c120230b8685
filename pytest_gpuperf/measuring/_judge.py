"""The one interval judge: a bound is met, violated or undecided by a confidence interval, never by a point.

A check passes when the whole interval is on the right side of its bound, fails when
the whole interval is on the wrong side, and is *inconclusive* when the interval
straddles the bound: that warns, or fails when the ``inconclusive`` setting says so.
``Measurement.assert_throughput``/``assert_latency`` and ``expect_interval`` (paired
ratios, efficiencies, fractions of a peak) both judge here.

An interval whose coverage falls short of the confidence asked for (a distribution-free
95% interval of the median needs 6 samples; from fewer, the full range covers less, and
one sample is a point) decides nothing: the check is inconclusive, wherever the range
lies. Not even a range wholly on the wrong side fails: when the true median meets the
bound, all n samples still land on the wrong side with probability up to 1/2**n (1/32 for
5 samples, 1/2 for one), more than the 2.5% per side a 95% interval allows, so a fail
would fail good code more often than the confidence claims. ``inconclusive="fail"``
makes such a check fail, as the user's choice.

A bound that is not a finite number is bad input: ``ValueError``, before judging.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ._stats import format_coverage, min_samples_for

__all__ = [
    "Check",
    "GpuperfAssertionError",
    "InconclusiveWarning",
    "Outcome",
    "check_bound",
    "counted_as",
    "expect_interval",
    "judge",
]

Outcome = Literal["pass", "fail", "inconclusive"]


class GpuperfAssertionError(AssertionError):
    """A bound that the whole confidence interval violates."""


class InconclusiveWarning(UserWarning):
    """A bound that the confidence interval straddles: neither met nor violated with confidence."""


@dataclass(frozen=True)
class Check:
    """The outcome of one assertion, kept with the record for the report and the JSON."""

    what: str  # "throughput", "latency", or what an estimate is of
    relation: str  # ">=" or "<="
    bound: str
    outcome: Outcome
    message: str


def _outcome(relation: str, bound: float, low: float, high: float) -> Outcome:
    if relation == ">=":
        return "pass" if low >= bound else "fail" if high < bound else "inconclusive"
    return "pass" if high <= bound else "fail" if low > bound else "inconclusive"


def _side(outcome: Outcome) -> str:
    return {"pass": "on the right side of", "fail": "on the wrong side of", "inconclusive": "straddling"}[outcome]


def counted_as(count: int, counted: str) -> str:
    """``3 samples``, ``1 sample``, ``1 paired round``."""
    return f"{count} {counted[:-1] if count == 1 and counted.endswith('s') else counted}"


def check_bound(name: str, bound: float, *, positive: bool = False, noun: str = "number", example: str = "") -> None:
    """Refuse a bound that cannot be judged: not finite (nan, inf), or not positive where it must be."""
    __tracebackhide__ = True
    if not math.isfinite(bound) or (positive and bound <= 0):
        rule = f"a positive, finite {noun}" if positive else f"a finite {noun}"
        raise ValueError(f"{name}: the bound must be {rule}{'' if not example else f', such as {example}'}")


def judge(
    what: str,
    relation: str,
    bound: float,
    median: float,
    low: float,
    high: float,
    *,
    confidence: float,
    achieved: float | None = None,
    count: int = 0,
    counted: str = "samples",
    evidence: str,
    inconclusive: str = "warn",
    observer: Callable[[Check], None] | None = None,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
    subject: str = "",
    why_undecided: str = "",
    stacklevel: int = 3,
    estimate: str = "median",
    of: str = "the median",
    need: int | None = None,
) -> Check:
    """Judge ``[low, high]`` (around ``median``) against ``relation`` (``>=``/``<=``) ``bound``.

    Raises GpuperfAssertionError on a fail (and on an inconclusive check when
    ``inconclusive == "fail"``), warns InconclusiveWarning otherwise; ``observer`` gets
    the Check first, so it lands in a record whatever happens next. ``evidence`` says
    where the interval comes from ("from 20 samples x 4 calls on cpu (...)"); ``subject``
    starts the message (a measurement's name). ``confidence`` is the confidence asked for;
    ``achieved`` the interval's actual coverage (order statistics are discrete) when it may
    be lower, from ``count`` ``counted`` ("samples", "paired rounds"): below ``confidence``
    the check is inconclusive, whatever the interval says. ``estimate`` names the point estimate
    (``median``, ``p99``), ``of`` what the interval is of (``the median``, ``the 99th percentile``)
    and ``need`` how many samples an interval of it needs (default: the median's, ``min_samples_for``).
    """
    __tracebackhide__ = True
    check_bound(f"{subject}{what} {relation} bound", bound)
    side = _outcome(relation, bound, low, high)
    short = achieved is not None and achieved < confidence - 1e-12
    outcome: Outcome = "inconclusive" if short else side
    expected = f"{'at least' if relation == '>=' else 'at most'} {fmt(bound)}"
    numbers = f"{estimate} {fmt(median)}, {confidence:.0%} CI [{fmt(low)}, {fmt(high)}] {evidence}"
    advice = "" if inconclusive == "fail" else ", or set --gpuperf-inconclusive=fail to fail on this"
    if short:
        assert achieved is not None
        need = min_samples_for(confidence) if need is None else need
        if count == 1:
            numbers = f"one sample is a point, not an interval: {fmt(median)} {evidence}, {_side(side)} the bound"
        else:
            numbers = (
                f"{estimate} {fmt(median)}, the {format_coverage(achieved)} interval [{fmt(low)}, {fmt(high)}] "
                f"{evidence}, {_side(side)} the bound"
            )
        few = f"only {counted_as(count, counted)}" if count else f"too few {counted}"
        message = (
            f"{subject}{what} {expected} is inconclusive: {few}, and a distribution-free {confidence:.0%} "
            f"interval of {of} needs at least {need}; {numbers}{why_undecided}. "
            f"Take at least {need} {counted} (--gpuperf-min-samples={need} and a --gpuperf-max-time long enough) "
            f"for a verdict{advice}"
        )
    elif outcome == "pass":
        message = f"{subject}{what} {expected}: met; {numbers}"
    elif outcome == "fail":
        message = f"{subject}{what} {expected} expected, but {numbers}; the whole interval is on the wrong side"
    else:
        message = (
            f"{subject}{what} {expected} is inconclusive: the interval straddles the bound; {numbers}{why_undecided}. "
            f"Measure longer (--gpuperf-max-time) for a verdict{advice}"
        )
    check = Check(what, relation, fmt(bound), outcome, message)
    if observer is not None:
        observer(check)
    if outcome == "fail" or (outcome == "inconclusive" and inconclusive == "fail"):
        raise GpuperfAssertionError(message)
    if outcome == "inconclusive":
        warnings.warn(InconclusiveWarning(message), stacklevel=stacklevel)
    return check


def expect_interval(
    what: str,
    median: float,
    low: float,
    high: float,
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    confidence: float = 0.95,
    achieved: float | None = None,
    count: int = 0,
    counted: str = "paired rounds",
    evidence: str,
    inconclusive: str = "warn",
    observer: Callable[[Check], None] | None = None,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
) -> Check:
    """Judge an estimate (median and CI ``[low, high]``) against exactly one of ``at_least``/``at_most``.

    ``confidence`` is the confidence asked for; pass an Estimate's ``confidence`` as ``achieved``
    and its ``count`` (it covers less than asked from too few rounds: the check is then inconclusive).
    """
    __tracebackhide__ = True
    if (at_least is None) == (at_most is None):
        raise ValueError(f"{what}: give exactly one of at_least= or at_most=")
    name, bound = ("at_least", at_least) if at_least is not None else ("at_most", at_most)
    assert bound is not None
    check_bound(f"{what}: {name}={bound!r}", bound, example=f"{name}=1.2")
    relation = ">=" if name == "at_least" else "<="
    return judge(
        what,
        relation,
        bound,
        median,
        low,
        high,
        confidence=confidence,
        achieved=achieved,
        count=count,
        counted=counted,
        evidence=evidence,
        inconclusive=inconclusive,
        observer=observer,
        fmt=fmt,
        stacklevel=4,
    )
