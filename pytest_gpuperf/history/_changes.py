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

Cost: each split is quadratic in its segment's length, in pure Python; a series of a few
hundred commits takes milliseconds.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._git import GitError, git
from ..measuring import counted, median, t_two_sided_p
from ..results import ResultsError, load_run
from ._asv import benchmark_name, time_ms
from ._asv_files import AsvError, points_of, read_results
from ._record import HistoryError

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
    "find_steps",
    "history_series",
    "why_no_change",
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
    value: float  # the median time per step in seconds, or an anchored series' time ratio (lower is better)
    date_ms: int | None = None  # the commit's date as asv stores it (milliseconds); None where unknown
    #: why the point is no value of the series ("": it is one): an anchored ratio too wide (``_anchored.py``)
    refused: str = ""


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
    #: the commits whose every point was refused (``HistoryPoint.refused``), left out of ``points``, oldest first
    refused: tuple[HistoryPoint, ...] = ()

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
    before: float  # mean of the segment before, in the series' unit (seconds, or a ratio to the anchor)
    after: float  # mean of the segment after, in the same unit
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
    return _detect(values, rule)[0]


def why_no_change(series: Series, rule: ChangeRule = DEFAULT_RULE) -> str:
    """Why ``changes_of`` finds no change in ``series`` ("" when it finds one): too few points, or the likeliest
    step (the last one the detector tried) and the part of ``rule`` it fails."""
    steps, nearest = _detect(series.values, rule)
    if steps:
        return ""
    if nearest is None:
        return f"{counted(len(series.points), 'point')}: a step needs {rule.min_segment} on each side"
    before, after = series.points[nearest.index - 1].commit, series.points[nearest.index].commit
    where = f"the likeliest step, {before[:8]}..{after[:8]} ({nearest.ratio - 1:+.1%}),"
    if nearest.p_value >= rule.alpha:
        return f"no step beyond the noise: {where} has p = {nearest.p_value:.2g}, not under {rule.alpha:g}"
    return f"no step beyond the noise: {where} is under the {rule.min_magnitude:.0%} a step must reach"


def _detect(values: Sequence[float], rule: ChangeRule) -> tuple[list[Step], Step | None]:
    """The steps, and with none the likeliest step refused (the last the merge pass dropped, or the best split of
    the whole series); None for a series too short to have one."""
    xs = _checked(values)
    if len(xs) < 2 * rule.min_segment:
        return [], None
    cuts: list[int] = []
    _split(xs, 0, len(xs), rule, _first_pass(rule.alpha), cuts)
    if not cuts:
        return [], _steps(xs, [_best_split(xs, 0, len(xs), rule.min_segment)])[0]
    return _merge(xs, sorted(cuts), rule)


def _checked(values: Sequence[float]) -> list[float]:
    out: list[float] = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(
                f"value {i} of the series is {value!r}, not a finite number: leave a commit without a result out "
                "of the series rather than filling it in"
            )
        out.append(float(value))
    return out


def _first_pass(alpha: float) -> float:
    """Otava's relaxed threshold for the split pass: candidates a little weaker than ``alpha`` survive it, so that
    the merge pass, which tests each against its neighbours' whole segments, decides."""
    return alpha * 10 if alpha < 0.05 else alpha * 2 if alpha < 0.5 else alpha


def _split(xs: list[float], start: int, end: int, rule: ChangeRule, alpha: float, cuts: list[int]) -> None:
    """Add to ``cuts`` the significant change points of ``xs[start:end]``, by binary segmentation."""
    m = rule.min_segment
    if end - start < 2 * m:
        return
    tau = _best_split(xs, start, end, m)
    if _t_test(xs[start:tau], xs[tau:end]) >= alpha:
        return
    cuts.append(tau)
    _split(xs, start, tau, rule, alpha, cuts)
    _split(xs, tau, end, rule, alpha, cuts)


def _best_split(xs: list[float], start: int, end: int, m: int) -> int:
    """The split ``tau`` of ``xs[start:end]`` (both parts ``m`` long at least) of the largest energy statistic.

    Matteson and James' divergence with exponent 1 between the parts ``L = xs[start:tau]`` and
    ``R = xs[tau:end]``, scaled by ``|L| |R| / (|L| + |R|)``:
    ``2 mean|l - r| - mean|l - l'| - mean|r - r'|`` over pairs. The within-part sums of distances
    grow by one point at a time, and the cross sum is the total less both: O(n^2) for the segment.
    """
    n = end - start
    seg = xs[start:end]
    left = [0.0] * (n + 1)  # left[k]: sum of |a - b| over pairs within seg[:k]
    for k in range(1, n + 1):
        x = seg[k - 1]
        left[k] = left[k - 1] + sum(abs(x - y) for y in seg[: k - 1])
    right = [0.0] * (n + 1)  # right[k]: the same within seg[k:]
    for k in range(n - 1, -1, -1):
        x = seg[k]
        right[k] = right[k + 1] + sum(abs(x - y) for y in seg[k + 1 :])
    total = left[n]
    best, best_q = start + m, -math.inf
    for k in range(m, n - m + 1):
        a, b = k, n - k
        cross = total - left[k] - right[k]
        q = a * b / n * (2 * cross / (a * b) - 2 * left[k] / (a * (a - 1)) - 2 * right[k] / (b * (b - 1)))
        if q > best_q:
            best, best_q = start + k, q
    return best


def _merge(xs: list[float], cuts: list[int], rule: ChangeRule) -> tuple[list[Step], Step | None]:
    """Otava's merge pass: drop the weakest change (largest p-value, else smallest magnitude) until every one left
    passes ``rule`` against the segments its neighbours bound; with none left, the last one dropped."""
    dropped = None
    while cuts:
        steps = _steps(xs, cuts)
        weakest = max(steps, key=lambda s: s.p_value)
        if weakest.p_value < rule.alpha:
            weakest = min(steps, key=lambda s: s.magnitude)
            if weakest.magnitude >= rule.min_magnitude:
                return steps, None
        cuts = [c for c in cuts if c != weakest.index]
        dropped = weakest
    return [], dropped


def _steps(xs: list[float], cuts: list[int]) -> list[Step]:
    bounds = [0, *cuts, len(xs)]
    out = []
    for i, cut in enumerate(cuts, 1):
        before, after = xs[bounds[i - 1] : cut], xs[cut : bounds[i + 1]]
        out.append(Step(cut, math.fsum(before) / len(before), math.fsum(after) / len(after), _t_test(before, after)))
    return out


def _t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p-value of Student's t-test (pooled variance) that ``a`` and ``b`` have one mean, as Otava's."""
    na, nb = len(a), len(b)
    mean_a, mean_b = math.fsum(a) / na, math.fsum(b) / nb
    df = na + nb - 2
    if df < 1:
        return 1.0
    pooled = (math.fsum((x - mean_a) ** 2 for x in a) + math.fsum((x - mean_b) ** 2 for x in b)) / df
    diff = abs(mean_a - mean_b)
    if diff <= 1e-12 * max(abs(mean_a), abs(mean_b)):
        return 1.0  # equal means (to rounding): no change, whatever the spread
    if pooled <= 0.0:
        return 0.0  # two constant, different levels
    t = diff / math.sqrt(pooled * (1 / na + 1 / nb))
    return t_two_sided_p(t, df)


def changes_of(series: Series, rule: ChangeRule = DEFAULT_RULE) -> list[Change]:
    """The changes of one series, oldest first."""
    points = series.points
    return [
        Change(series.key, s.index, points[s.index - 1].commit, points[s.index].commit, s.before, s.after, s.p_value)
        for s in find_steps(series.values, rule)
    ]


def commit_order(repo: Path, branch: str = "HEAD") -> list[str]:
    """The first-parent commits of ``branch`` in ``repo``, oldest first (full hashes): the order of every series.

    HistoryError when ``repo`` is not a git work tree or ``branch`` is unknown.
    """
    try:
        return git(Path(repo), "rev-list", "--first-parent", "--reverse", branch, "--").split()
    except GitError as exc:
        raise HistoryError(
            f"cannot list the commits of {branch!r} in {repo} ({exc}); give a git repository and a branch it has"
        ) from None


# ---------------------------------------------------------------- reading the history


def history_series(
    source: Path,
    *,
    order: Sequence[str] | None = None,
    machine: str | None = None,
) -> dict[SeriesKey, Series]:
    """Every benchmark's history found in ``source``, keyed by (benchmark, device, machine).

    ``source`` is an asv results directory (``<out>/results`` of ``history record``, or ``<out>`` itself, or
    what ``--gpuperf-asv`` wrote: ``<machine>/<commit[:8]>-<env>.json``), or a pytest-gpuperf results directory
    (``.gpuperf``, its ``runs/*.json``: each clean run's records, the machine being the run's host name; runs of
    a dirty tree are left out, they belong to no commit). Several results of one commit (asv environments,
    repeated runs) give the median of their medians.

    ``order``: the commits in order, oldest first (``commit_order``); points of other commits are left out (a side
    branch's results are no part of the branch's history) and abbreviated asv hashes are matched to it. Without
    it, points are ordered by commit date (asv's files) or run time (stored runs).

    ``machine``: only that machine's series. HistoryError, naming what was found and the fix, when ``source`` holds
    no results, or no results of ``machine``.
    """
    source = Path(source)
    if not source.is_dir():
        raise HistoryError(
            f"{source} is not a directory: give an asv results directory (history record's <out>/results) "
            "or a pytest-gpuperf results directory (.gpuperf)"
        )
    if (source / "results").is_dir() and not (source / "runs").is_dir():
        source = source / "results"  # history record's --out, which holds the asv results directory
    found = _stored_runs(source) if (source / "runs").is_dir() else _asv_points(source)
    machines = sorted({key.machine for key, _ in found})
    if not found:
        raise HistoryError(
            f"no history in {source}: it holds no asv results of pytest-gpuperf (<machine>/<commit>-<env>.json) "
            "and no stored runs (runs/*.json); record some first with `pytest-gpuperf history record`"
        )
    if machine is not None and machine not in machines:
        raise HistoryError(f"no results of machine {machine!r} in {source}; the machines there: {', '.join(machines)}")
    return _series(found, order, machine)


#: (key, point) pairs as read, before ordering and merging.
_Found = list[tuple[SeriesKey, HistoryPoint]]


def _asv_points(results: Path) -> _Found:
    found: _Found = []
    for path in sorted(results.glob("*/*.json")):
        if path.name == "machine.json" or not (path.parent / "machine.json").is_file():
            continue  # asv keeps a machine.json beside each machine's results; other folders are not results
        try:
            data = read_results(path)
        except AsvError as exc:
            raise HistoryError(f"{exc}") from None
        commit, date = data.get("commit_hash"), data.get("date")
        rows = data.get("results")
        if not isinstance(commit, str) or not isinstance(rows, dict):
            continue
        date_ms = date if isinstance(date, int) and not isinstance(date, bool) else None
        for name in sorted(rows):
            for device, point in points_of(data, name).items():
                if math.isfinite(point.median):
                    key, value = SeriesKey(name, device, path.parent.name), point.median
                    found.append((key, HistoryPoint(commit, value, date_ms, point.refused)))
    return found


def _stored_runs(root: Path) -> _Found:
    found: _Found = []
    for path in sorted((root / "runs").glob("*.json")):
        try:
            run = load_run(path)
        except ResultsError as exc:
            raise HistoryError(f"{exc}") from None
        git_state = run.fingerprint.git
        if git_state is None or not git_state.commit or git_state.dirty:
            continue
        host = run.fingerprint.hostname or "unknown"
        when = time_ms(run.created)
        for record in run.records:
            name = benchmark_name(record)
            if name and record.measurement.samples:
                value = median(record.measurement.samples)
                found.append((SeriesKey(name, record.device, host), HistoryPoint(git_state.commit, value, when)))
    return found


def _series(found: _Found, order: Sequence[str] | None, machine: str | None) -> dict[SeriesKey, Series]:
    position = {commit: i for i, commit in enumerate(order or ())}
    by_key: dict[SeriesKey, dict[str, list[HistoryPoint]]] = {}
    for key, point in found:
        if machine is not None and key.machine != machine:
            continue
        commit = _full(point.commit, position) if order is not None else point.commit
        if commit is None:
            continue
        by_key.setdefault(key, {}).setdefault(commit, []).append(point)
    out = {}
    for key, commits in sorted(by_key.items()):
        points = [_merged(commit, ps) for commit, ps in commits.items()]
        if order is not None:
            points.sort(key=lambda p: position[p.commit])
        else:
            points.sort(key=lambda p: (p.date_ms is None, p.date_ms or 0, p.commit))
        kept = tuple(p for p in points if not p.refused)
        out[key] = Series(key, kept, tuple(p for p in points if p.refused))
    return out


def _merged(commit: str, points: Sequence[HistoryPoint]) -> HistoryPoint:
    """One commit's point from its results: the median of those not refused (a refused one where all are)."""
    kept = [p for p in points if not p.refused] or list(points)
    date = min((p.date_ms for p in points if p.date_ms), default=None)
    return HistoryPoint(commit, median(p.value for p in kept), date, kept[0].refused)


def _full(commit: str, position: Mapping[str, int]) -> str | None:
    """``commit`` as named in the order (asv's file names abbreviate; its files keep the full hash): None if absent."""
    if commit in position:
        return commit
    matches = [c for c in position if c.startswith(commit)] if len(commit) >= 7 else []
    return matches[0] if len(matches) == 1 else None
