"""Change points in the recorded history: where a benchmark's time per step stepped up or down, and by how much.

A benchmark's history on one machine is a series of values, one per commit, in the
branch's commit order (oldest first). Noise makes every point differ from the last,
so a change is a *step*: the mean of the points after it differs from the mean of the
points before it, significantly and by more than a tolerance. The method is the one
MongoDB's CI uses (Daly et al., arXiv 2003.00584) as Apache Otava (formerly Hunter;
Fleming et al., doi 10.1145/3578244.3583719) implements it, written here in pure
Python (Otava pins numpy and pulls BigQuery, Postgres and Slack clients):

1. **Split.** E-divisive means (Matteson and James): in a segment, the split that
   maximizes the energy distance between the points before and after it is a
   candidate; it is kept when a two-sided Student's t-test between the two parts
   gives a p-value under ``10 * alpha`` (a relaxed first pass, as Otava's), and both
   parts are split again. Each part must hold ``min_segment`` points at least, so a
   single spike (or a run shorter than ``min_segment``) is never a step of its own.
2. **Merge.** Each candidate is then tested against its neighbours' segments (from
   the previous change to the next one); the weakest is dropped, and its neighbours
   retested, until every change has a p-value under ``alpha`` and a relative
   magnitude of ``min_magnitude`` at least.

Values are what asv keeps: time per step in seconds, lower is better; a change whose
``ratio`` (mean after / mean before) is above 1 is a regression.

A slow creep (1% per commit over 8 commits) has no single step: it is found as one or
two changes inside or at the ends of the creep, each covering part of the rise (see
``bench/changepoints.py`` for how often, on this machine's noise).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "DEFAULT_RULE",
    "Change",
    "ChangeRule",
    "HistoryPoint",
    "Series",
    "SeriesKey",
    "Step",
    "changes_of",
    "commit_order",
    "find_changes",
    "find_steps",
    "history_series",
]


@dataclass(frozen=True)
class ChangeRule:
    """What counts as a change: both parts at least ``min_segment`` points long, a t-test p-value under ``alpha``,
    and a relative change (``max(after/before, before/after) - 1``) of ``min_magnitude`` at least."""

    min_segment: int = 3
    min_magnitude: float = 0.02
    alpha: float = 0.001

    def __post_init__(self) -> None:
        if self.min_segment < 2:
            raise ValueError(f"min_segment={self.min_segment}: a segment needs 2 points at least for a t-test")
        if not 0.0 <= self.min_magnitude < 1.0:
            raise ValueError(f"min_magnitude={self.min_magnitude}: give a fraction in [0, 1), 0.05 for 5%")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha={self.alpha}: give a p-value threshold in (0, 1), 0.001 for example")


DEFAULT_RULE: Final = ChangeRule()


@dataclass(frozen=True)
class Step:
    """A change point of a plain series: the points from ``index`` on differ from those before it.

    ``before`` and ``after`` are the means of the segments on either side (from the previous change, to the next).
    """

    index: int
    before: float
    after: float
    p_value: float

    @property
    def ratio(self) -> float:
        """after / before: above 1 is slower (a regression, for times)."""
        return self.after / self.before if self.before else float("inf")

    @property
    def magnitude(self) -> float:
        """The relative size of the change either way: ``max(ratio, 1/ratio) - 1``."""
        return _magnitude(self.before, self.after)


@dataclass(frozen=True)
class HistoryPoint:
    """One commit's value of one benchmark on one machine."""

    commit: str  # the full hash
    value: float  # the median time per step, seconds (lower is better)
    date_ms: int | None = None  # the commit's date as asv stores it (milliseconds); None where unknown


@dataclass(frozen=True, order=True)
class SeriesKey:
    """Whose history: an asv benchmark name (``history.benchmark_name``), its device parameter, the asv machine."""

    benchmark: str
    device: str
    machine: str

    def __str__(self) -> str:
        return f"{self.benchmark} [{self.device}] on {self.machine}"


@dataclass(frozen=True)
class Series:
    """One benchmark's history on one machine, oldest commit first, one point per commit."""

    key: SeriesKey
    points: tuple[HistoryPoint, ...]

    @property
    def values(self) -> list[float]:
        return [p.value for p in self.points]


@dataclass(frozen=True)
class Change:
    """A change point of a benchmark's history: ``after_commit`` is the first commit of the new level, and
    ``before_commit`` the last of the old one (the culprit lies in ``before_commit..after_commit``)."""

    key: SeriesKey
    index: int  # of after_commit in the series' points
    before_commit: str
    after_commit: str
    before: float  # mean of the segment before, seconds
    after: float  # mean of the segment after, seconds
    p_value: float

    @property
    def ratio(self) -> float:
        """after / before: above 1 is a regression (times: lower is better)."""
        return self.after / self.before if self.before else float("inf")

    @property
    def regression(self) -> bool:
        return self.after > self.before

    @property
    def magnitude(self) -> float:
        return _magnitude(self.before, self.after)


def _magnitude(before: float, after: float) -> float:
    if before <= 0 or after <= 0:
        return float("inf") if before != after else 0.0
    return max(after / before, before / after) - 1.0


def find_steps(values: Sequence[float], rule: ChangeRule = DEFAULT_RULE) -> list[Step]:
    """The change points of ``values`` (in order), by E-divisive means with a t-test (the module's docstring).

    A series shorter than ``2 * rule.min_segment`` has none. ValueError names the first value that is not a finite
    number (None, NaN, infinity): a missing commit is left out of the series, never filled in.
    """
    raise NotImplementedError


def changes_of(series: Series, rule: ChangeRule = DEFAULT_RULE) -> list[Change]:
    """The changes of one series, oldest first."""
    raise NotImplementedError


def find_changes(series: Iterable[Series], rule: ChangeRule = DEFAULT_RULE) -> list[Change]:
    """The changes of every series, in key order then oldest first."""
    raise NotImplementedError


def commit_order(repo: Path, branch: str = "HEAD") -> list[str]:
    """The first-parent commits of ``branch`` in ``repo``, oldest first (full hashes): the order of every series.

    HistoryError when ``repo`` is not a git work tree or ``branch`` is unknown.
    """
    raise NotImplementedError


def history_series(
    source: Path,
    *,
    order: Sequence[str] | None = None,
    machine: str | None = None,
) -> dict[SeriesKey, Series]:
    """Every benchmark's history found in ``source``, keyed by (benchmark, device, machine).

    ``source`` is an asv results directory (``<out>/results`` of ``history record``, or what ``--gpuperf-asv``
    wrote: ``<machine>/<commit[:8]>-<env>.json``), or a pytest-gpuperf results directory (``.gpuperf``, its
    ``runs/*.json``: each clean run's records, the machine being the run's host name; runs of a dirty tree are
    left out, they belong to no commit). Several results of one commit (asv environments, repeated runs) give the
    median of their medians.

    ``order``: the commits in order, oldest first (``commit_order``); points of other commits are left out (a side
    branch's results are no part of the branch's history) and abbreviated asv hashes are matched to it. Without
    it, points are ordered by commit date (asv's files) or run time (stored runs).

    ``machine``: only that machine's series. HistoryError, naming what was found and the fix, when ``source`` holds
    no results, or no results of ``machine``.
    """
    raise NotImplementedError
