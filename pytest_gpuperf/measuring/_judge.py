"""The one interval judge: a bound is met, violated or undecided by a confidence interval, never by a point.

A check passes when the whole interval is on the right side of its bound, fails when
the whole interval is on the wrong side, and is *inconclusive* when the interval
straddles the bound: that warns, or fails when the ``inconclusive`` setting says so.
``Measurement.assert_throughput``/``assert_latency`` and ``expect_estimate`` (paired
ratios, efficiencies, fractions of a peak) both judge here.

An interval whose coverage falls short of the confidence asked for (a distribution-free
95% interval of the median needs 6 samples; from fewer, the full range covers less, and
one sample is a point) decides nothing: the check is inconclusive, wherever the range
lies. Not even a range wholly on the wrong side fails: when the true median meets the
bound, all n samples still land on the wrong side with probability up to 1/2**n (1/32 for
5 samples, 1/2 for one), more than the 2.5% per side a 95% interval allows, so a fail
would fail good code more often than the confidence claims. ``inconclusive="fail"``
makes such a check fail, as the user's choice.

What is judged is an ``Estimate`` (``_stats.py``): its value, interval, the confidence
asked for and achieved, and where it comes from (what it counts, its evidence, whose it is,
why its sampling stopped). What varies with the caller, not with the estimate, is a
``JudgeContext``: how values read (their unit), what an undecided check does, and who
receives the Check. ``expect_estimate`` takes the bound as ``at_least=``/``at_most=``.

A bound that is not a finite number is bad input: ``ValueError``, before judging.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from ._stats import Estimate, counted_as, format_coverage

__all__ = [
    "Check",
    "GpuperfAssertionError",
    "InconclusiveWarning",
    "JudgeContext",
    "Outcome",
    "Relation",
    "check_bound",
    "expect_estimate",
    "judge",
]

Outcome = Literal["pass", "fail", "inconclusive"]
#: ``>=``: the bound is a floor (``at_least``); ``<=``: a ceiling (``at_most``).
Relation = Literal[">=", "<="]


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


def _three_figures(value: float) -> str:
    return f"{value:.3g}"


@dataclass(frozen=True)
class JudgeContext:
    """What the caller of a check decides, not its estimate.

    ``fmt`` shows a value (with its unit: ``Quantity(v, "s")``); ``inconclusive`` is what an
    undecided check does, ``warn`` or ``fail`` (``--gpuperf-inconclusive``); ``observer``
    receives the Check before anything is raised, so that it lands in a record.
    """

    fmt: Callable[[float], str] = field(default=_three_figures, compare=False)
    inconclusive: str = "warn"
    observer: Callable[[Check], None] | None = field(default=None, compare=False)


#: Values to three significant figures, undecided checks warn, and no one keeps the Check.
PLAIN: Final = JudgeContext()


def _outcome(relation: Relation, bound: float, low: float, high: float) -> Outcome:
    if relation == ">=":
        return "pass" if low >= bound else "fail" if high < bound else "inconclusive"
    return "pass" if high <= bound else "fail" if low > bound else "inconclusive"


def _named(estimate: Estimate) -> str:
    """What is judged, as a message starts: ``test_mm[cpu]: throughput``, or ``speedup of amp over fp32``."""
    return estimate.what if estimate.subject is None else f"{estimate.subject}: {estimate.what}"


def _side(outcome: Outcome) -> str:
    return {"pass": "on the right side of", "fail": "on the wrong side of", "inconclusive": "straddling"}[outcome]


def check_bound(name: str, bound: float, *, positive: bool = False, noun: str = "number", example: str = "") -> None:
    """Refuse a bound that cannot be judged: not finite (nan, inf), or not positive where it must be."""
    __tracebackhide__ = True
    if not math.isfinite(bound) or (positive and bound <= 0):
        rule = f"a positive, finite {noun}" if positive else f"a finite {noun}"
        raise ValueError(f"{name}: the bound must be {rule}{'' if not example else f', such as {example}'}")


def judge(
    estimate: Estimate, relation: Relation, bound: float, context: JudgeContext = PLAIN, *, stacklevel: int = 1
) -> Check:
    """Judge ``estimate``'s interval against ``relation`` (``>=``/``<=``) ``bound``.

    Raises GpuperfAssertionError on a fail (and on an inconclusive check when the context's
    ``inconclusive`` is ``fail``), warns InconclusiveWarning otherwise, at the frame
    ``stacklevel`` counted as ``warnings.warn`` would count it in place of ``judge`` (1: the
    line that calls ``judge``, 2: the caller of that function). The context's ``observer``
    gets the Check first, so it lands in a record whatever happens next. An estimate whose
    interval covers less than the confidence asked for (``falls_short``: too few values) is
    inconclusive, whatever its interval says.
    """
    __tracebackhide__ = True
    check_bound(f"{_named(estimate)} {relation} bound", bound)
    outcome, message = _verdict(estimate, relation, bound, context)
    check = Check(estimate.what, relation, context.fmt(bound), outcome, message)
    if context.observer is not None:
        context.observer(check)
    if outcome == "fail" or (outcome == "inconclusive" and context.inconclusive == "fail"):
        raise GpuperfAssertionError(message)
    if outcome == "inconclusive":
        warnings.warn(InconclusiveWarning(message), stacklevel=stacklevel + 1)
    return check


def _verdict(estimate: Estimate, relation: Relation, bound: float, context: JudgeContext) -> tuple[Outcome, str]:
    """The outcome and the message that says it: bound, estimate, interval, evidence, and what would decide."""
    e, fmt = estimate, context.fmt
    side = _outcome(relation, bound, e.low, e.high)
    expected = f"{_named(e)} {'at least' if relation == '>=' else 'at most'} {fmt(bound)}"
    why_undecided = "" if e.stopped is None else f"; sampling stopped: {e.stopped}"
    advice = "" if context.inconclusive == "fail" else ", or set --gpuperf-inconclusive=fail to fail on this"
    if e.falls_short:
        need = e.needs
        if e.count == 1:
            numbers = f"one sample is a point, not an interval: {fmt(e.value)} {e.source}, {_side(side)} the bound"
        else:
            numbers = (
                f"{e.statistic} {fmt(e.value)}, the {format_coverage(e.confidence)} interval "
                f"[{fmt(e.low)}, {fmt(e.high)}] {e.source}, {_side(side)} the bound"
            )
        few = f"only {counted_as(e.count, e.counted)}" if e.count else f"too few {e.counted}"
        return "inconclusive", (
            f"{expected} is inconclusive: {few}, and a distribution-free {e.asked:.0%} "
            f"interval of {e.interval_of} needs at least {need}; {numbers}{why_undecided}. "
            f"Take at least {need} {e.counted} (--gpuperf-min-samples={need} and a --gpuperf-max-time long enough) "
            f"for a verdict{advice}"
        )
    numbers = f"{e.statistic} {fmt(e.value)}, {e.asked:.0%} CI [{fmt(e.low)}, {fmt(e.high)}] {e.source}"
    if side == "pass":
        return side, f"{expected}: met; {numbers}"
    if side == "fail":
        return side, f"{expected} expected, but {numbers}; the whole interval is on the wrong side"
    return side, (
        f"{expected} is inconclusive: the interval straddles the bound; {numbers}{why_undecided}. "
        f"Measure longer (--gpuperf-max-time) for a verdict{advice}"
    )


def expect_estimate(
    estimate: Estimate,
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    context: JudgeContext = PLAIN,
    stacklevel: int = 1,
) -> Check:
    """Judge ``estimate`` against exactly one of ``at_least``/``at_most`` (``judge`` with the bound by name).

    ValueError, before judging, for no bound, two, or one that is not finite; ``stacklevel``
    as ``judge`` counts it (1: the line that calls ``expect_estimate``).
    """
    __tracebackhide__ = True
    if (at_least is None) == (at_most is None):
        raise ValueError(f"{estimate.what}: give exactly one of at_least= or at_most=")
    name, bound = ("at_least", at_least) if at_least is not None else ("at_most", at_most)
    assert bound is not None
    check_bound(f"{estimate.what}: {name}={bound!r}", bound, example=f"{name}=1.2")
    return judge(estimate, ">=" if name == "at_least" else "<=", bound, context, stacklevel=stacklevel + 1)
