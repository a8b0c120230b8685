"""The one interval judge: a bound is met, violated or undecided by a confidence interval, never by a point.

A check passes when the whole interval is on the right side of its bound, fails when
the whole interval is on the wrong side, and is *inconclusive* when the interval
straddles the bound: that warns, or fails when the ``inconclusive`` setting says so.
``Measurement.assert_throughput``/``assert_latency`` and ``expect_interval`` (paired
ratios, efficiencies, fractions of a peak) both judge here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["Check", "GpuperfAssertionError", "InconclusiveWarning", "Outcome", "expect_interval", "judge"]

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


def judge(
    what: str,
    relation: str,
    bound: float,
    median: float,
    low: float,
    high: float,
    *,
    confidence: float,
    evidence: str,
    inconclusive: str = "warn",
    observer: Callable[[Check], None] | None = None,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
    subject: str = "",
    why_undecided: str = "",
    stacklevel: int = 3,
) -> Check:
    """Judge ``[low, high]`` (around ``median``) against ``relation`` (``>=``/``<=``) ``bound``.

    Raises GpuperfAssertionError on a fail (and on an inconclusive check when
    ``inconclusive == "fail"``), warns InconclusiveWarning otherwise; ``observer`` gets
    the Check first, so it lands in a record whatever happens next. ``evidence`` says
    where the interval comes from ("from 20 samples x 4 calls on cpu (...)"); ``subject``
    starts the message (a measurement's name).
    """
    __tracebackhide__ = True
    outcome = _outcome(relation, bound, low, high)
    expected = f"{'at least' if relation == '>=' else 'at most'} {fmt(bound)}"
    numbers = f"median {fmt(median)}, {confidence:.0%} CI [{fmt(low)}, {fmt(high)}] {evidence}"
    if outcome == "pass":
        message = f"{subject}{what} {expected}: met; {numbers}"
    elif outcome == "fail":
        message = f"{subject}{what} {expected} expected, but {numbers}; the whole interval is on the wrong side"
    else:
        message = (
            f"{subject}{what} {expected} is inconclusive: the interval straddles the bound; {numbers}{why_undecided}. "
            "Measure longer (--gpuperf-max-time) for a verdict"
            + ("" if inconclusive == "fail" else ", or set --gpuperf-inconclusive=fail to fail on this")
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
    evidence: str,
    inconclusive: str = "warn",
    observer: Callable[[Check], None] | None = None,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
) -> Check:
    """Judge an estimate (median and CI ``[low, high]``) against exactly one of ``at_least``/``at_most``."""
    __tracebackhide__ = True
    if (at_least is None) == (at_most is None):
        raise ValueError(f"{what}: give exactly one of at_least= or at_most=")
    relation, bound = (">=", at_least) if at_least is not None else ("<=", at_most)
    assert bound is not None
    return judge(
        what,
        relation,
        bound,
        median,
        low,
        high,
        confidence=confidence,
        evidence=evidence,
        inconclusive=inconclusive,
        observer=observer,
        fmt=fmt,
        stacklevel=4,
    )
