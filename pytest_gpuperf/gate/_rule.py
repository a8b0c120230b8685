"""The verdict rule shared by every route: significance first, then the tolerance, both ways.

``docs/how-the-gate-decides.md`` is the one full statement of the rule; this module
implements it. The stored-baseline gate (``pytest --gpuperf-compare``,
``pytest-gpuperf compare``) estimates the ratio current/baseline from runs
(``estimate``); ``pytest-gpuperf ab`` from paired rounds. Either way ``verdict_for``
decides and ``reason_for`` says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ..measuring import Estimate, min_samples_for, t_quantile, values
from ._verdicts import DEFAULT_FAIL_ON, Verdict

__all__ = [
    "DEFAULT_NOISE_FLOOR",
    "DEFAULT_TOLERANCE",
    "OUTLIER_FLOORS",
    "POWER",
    "PRIOR_DF",
    "Policy",
    "describe_tolerance",
    "detectable",
    "detection_target",
    "estimate",
    "log_se",
    "percent",
    "reason_for",
    "seconds_to_see",
    "short_of_goal",
    "stored_tolerance",
    "tolerance_for",
    "verdict_for",
]

DEFAULT_TOLERANCE: Final = 0.05
DEFAULT_NOISE_FLOOR: Final = 0.02
#: How many runs' worth of evidence the noise floor counts for.
PRIOR_DF: Final = 4.0
#: Runs slower than their side's low median run by more than this many noise floors are left out.
OUTLIER_FLOORS: Final = 4.0
#: The power at which a row states the smallest change it can see (``detectable``): a change that large is called
#: significant in four of five like measurements.
POWER: Final = 0.8


@dataclass(frozen=True)
class Policy:
    tolerance: values.Tolerance = DEFAULT_TOLERANCE
    noise_floor: float = DEFAULT_NOISE_FLOOR
    confidence: float = 0.95
    fail_on: frozenset[str] = frozenset(DEFAULT_FAIL_ON)
    allow_mismatch: frozenset[str] = frozenset()
    #: ``--gpuperf-detect``: a row whose evidence cannot see this change says so in its reason
    detect: float | None = None


def estimate(
    base: Sequence[float],
    head: Sequence[float],
    *,
    noise_floor: float,
    base_within: Sequence[float] = (),
    head_within: Sequence[float] = (),
    confidence: float = 0.95,
) -> Estimate:
    """The ratio head/base and its Student-t interval, from one log time per run on each side.

    The run-to-run variance is pooled from both sides and shrunk towards the noise floor
    as if the floor were ``PRIOR_DF`` runs of evidence; a run whose own variance
    (``*_within``) is larger counts with that.
    """
    if not base or not head:
        raise ValueError("need at least one run on each side")
    mb, mh = sum(base) / len(base), sum(head) / len(head)
    ss = sum((x - mb) ** 2 for x in base) + sum((y - mh) ** 2 for y in head)
    df = float(len(base) - 1 + len(head) - 1)
    sigma2 = (ss + PRIOR_DF * noise_floor**2) / (df + PRIOR_DF)

    def mean_variance(n: int, within: Sequence[float]) -> float:
        per_run = [max(sigma2, w) for w in within] if within else [sigma2] * n
        return sum(per_run) / len(per_run) ** 2

    se = math.sqrt(mean_variance(len(base), base_within) + mean_variance(len(head), head_within))
    total_df = df + PRIOR_DF
    q = t_quantile((1.0 + confidence) / 2.0, total_df) if se > 0 else 0.0
    d = mh - mb
    return Estimate(
        "time ratio current/baseline",
        math.exp(d),
        math.exp(d - q * se),
        math.exp(d + q * se),
        confidence,
        len(base) + len(head),
        spread=math.sqrt(sigma2),
        df=total_df,
    )


def detectable(est: Estimate, power: float = POWER) -> float | None:
    """The smallest change this evidence can see (its minimum detectable effect): the relative change, either way,
    that an estimate with this one's interval width and degrees of freedom calls significant with probability
    ``power``, at the interval's own confidence. None where the interval decides nothing (too few paired rounds).

    The interval's half-width in log units is q * se, q its quantile (Student's t with ``df`` on the stored route;
    the normal for ``ab``'s distribution-free interval of the median, whose width follows the median's standard
    error); a change of (q + q_power) * se puts the interval's near end past 1 in ``power`` of such measurements.
    It says what this run's noise and count could see, not what the next run's will: ``tests/gate/test_rule.py``
    checks the rate at which a planted change of that size is found."""
    if not 0.5 <= power < 1.0:
        raise ValueError(f"power={power!r} must be at least 0.5 and below 1")
    se = log_se(est)
    if se is None:
        return None
    df = math.inf if est.df is None else est.df
    return math.expm1(se * (t_quantile((1.0 + est.confidence) / 2.0, df) + t_quantile(power, df))) if se else 0.0


def log_se(est: Estimate) -> float | None:
    """The standard error, in log units, that the estimate's interval implies (its half-width over its quantile:
    Student's t with ``df``, else the normal); None where the interval decides nothing."""
    if est.falls_short or not (est.low > 0.0 and est.high >= est.low):
        return None
    q = t_quantile((1.0 + est.confidence) / 2.0, math.inf if est.df is None else est.df)
    return (math.log(est.high) - math.log(est.low)) / (2.0 * q)


def short_of_goal(seen: float | None, goal: float, remedy: str, *, counted: str = "rounds", after: str = "") -> str:
    """``--detect``'s note on a row that cannot see ``goal`` (``seen``: what it can, None: nothing), ending in
    ``remedy``; '' where it sees the goal."""
    if seen is not None and seen <= goal:
        return ""
    can = f"too few {counted} to see any change" if seen is None else f"can see >= {percent(seen)}"
    return f"; {can}{after}, short of the {percent(goal)} goal: {remedy}"


def detection_target(goal: float, confidence: float = 0.95, power: float = POWER) -> float:
    """The interval half-width (log units, about relative) at which an interval of many rounds can see a change
    of ``goal`` (``detectable`` inverted, the normal's quantiles): ``ab --detect``'s stop rule target."""
    q = t_quantile((1.0 + confidence) / 2.0, math.inf)
    return math.log1p(goal) * q / (q + t_quantile(power, math.inf))


def seconds_to_see(seen: float, goal: float, seconds: float) -> float:
    """About how long rounds must run to see ``goal`` where ``seconds`` of them saw ``seen``: the interval narrows
    as the square root of the rounds."""
    return seconds * (math.log1p(seen) / math.log1p(goal)) ** 2


def tolerance_for(setting: values.Tolerance, est: Estimate | None) -> float:
    """A row's tolerance: the one given, or under ``auto`` the smallest change its evidence can see
    (``detectable``), never under auto's floor (the floor where the evidence sees nothing)."""
    if not isinstance(setting, values.AutoTolerance):
        return setting
    seen = None if est is None else detectable(est)
    return setting.floor if seen is None else max(setting.floor, seen)


def verdict_for(est: Estimate, tolerance: float) -> Verdict:
    """Significance first, then the tolerance, both ways; never a verdict from too few rounds for the interval,
    and never *unchanged* where the evidence could not see a change of the tolerance (``detectable``)."""
    if est.falls_short:
        return Verdict.INCONCLUSIVE
    above, below = est.value > 1.0 + tolerance, est.value < 1.0 / (1.0 + tolerance)
    if est.significant and above:
        return Verdict.SLOWER
    if est.significant and below:
        return Verdict.FASTER
    if above or below or not _sees(est, tolerance):
        return Verdict.INCONCLUSIVE
    return Verdict.UNCHANGED


def _sees(est: Estimate, tolerance: float) -> bool:
    """Could this evidence see a change of ``tolerance``, at ``POWER``?"""
    seen = detectable(est)
    return seen is not None and seen <= tolerance


def stored_tolerance(settings: Mapping[str, object], default: values.Tolerance) -> values.Tolerance:
    """The tolerance a run's ``settings`` say its session ran with (a fraction, or auto's text), else ``default``."""
    value = settings.get("tolerance")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default
    try:
        return values.tolerance(value)
    except values.SettingError:
        return default


def describe_tolerance(setting: values.Tolerance) -> str:
    """``5%``, ``auto``, ``auto:3%``: a tolerance as given."""
    return str(setting) if isinstance(setting, values.AutoTolerance) else percent(setting)


def percent(fraction: float) -> str:
    """``5%``, ``3.4%``: a tolerance or a detectable change, to the tenth of a percent it is written to."""
    text = f"{fraction:.1%}"
    return text.replace(".0%", "%")


def reason_for(
    verdict: Verdict, est: Estimate, tolerance: float, *, noise: str, remedy: str, auto: bool = False
) -> str:
    """Why ``verdict``: the change, and for an inconclusive one the noise that hid it and what to do.

    ``noise`` names what the interval comes from ("run-to-run noise 2.0% (3 baseline runs)",
    "40 paired rounds"); ``remedy`` is what would narrow it ("raise --max-time"); ``auto``: the tolerance is the
    row's own (``tolerance_for``), said as ``the 6.3% tolerance (auto)``.
    """
    change = f"{est.value - 1:+.1%}"
    named = f"{percent(tolerance)} tolerance" + (" (auto)" if auto else "")
    if est.falls_short and est.nominal is not None:
        need = min_samples_for(est.nominal)
        return (
            f"{change}, but {noise} are too few: a distribution-free {est.nominal:.0%} interval needs at least "
            f"{need}; {remedy}"
        )
    if verdict in (Verdict.SLOWER, Verdict.FASTER):
        return f"{change}: significant and over the {named}"
    if verdict is Verdict.UNCHANGED:
        return f"within the {named}" + (f" ({change}, significant)" if est.significant else "")
    if 1.0 / (1.0 + tolerance) <= est.value <= 1.0 + tolerance:
        seen = detectable(est)
        return (
            f"{change}: inconclusive at {percent(tolerance)}, this test can see >= {percent(seen or 0.0)} "
            f"({noise}); {remedy}"
        )
    return f"{change} but not significant against {noise}; {remedy}"
