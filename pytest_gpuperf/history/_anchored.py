"""``history record --anchor REV``: each commit's workloads timed side by side with the anchor commit's.

A history of medians, one process per commit, carries the machine's drift between the
moments the commits were measured: on a shared machine the medians of an unchanged workload
moved by 4 to 8% (standard deviation) from one process to the next, while each median's own
99% interval was about 3% wide (``bench/evidence/history.md``, the change-point benchmark). No number
of samples in one process removes that, and a 5% step hides in it.

Here each commit is measured as ``ab`` measures a pull request: its workloads module and the
anchor's, imported side by side in one process, timed in paired rounds (``measuring/_paired.py``).
What is recorded is the median of the per-round ratios, commit's time / anchor's time, with the
99% interval of that median: the drift falls on both sides of every round and cancels. An
unchanged workload's ratios moved by 1.1% at 1 s of rounds per commit on the same machine. The
anchor is fixed for the whole history, so the ratios of different commits compare with each
other; its first 8 hex digits are part of each benchmark's name (``ab_vs_1a2b3c4d.mlp_train``),
so that a history against another anchor is another series. Like every value this project
writes to asv, lower is better (1.05: the commit takes 5% longer than the anchor).

A ratio is only of use to the history when its interval can tell a step from none. One whose
99% interval is not within ``WIDEST`` (5%, ab's default tolerance, the smallest step
``history regressions`` confirms by default) of it either way, or that has no 99% interval (fewer
than 8 rounds), is refused: the rounds disagree (a busy machine once gave ratios of 0.01 to 0.2 in
some rounds and 7 to 36 in others, median 11.258), and as a point it would draw a step in asv's
graph on unchanged code. Its line says so and why; it is written to asv as no value, with its
ratios as samples and the reason beside the rows (``_asv_files.REFUSED``), and ``history
regressions`` leaves it out of the series and counts it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._git import commit_time
from ..gate import (
    DEFAULT_MAX_TIME,
    DEFAULT_TOLERANCE,
    AbError,
    AbOptions,
    AbResult,
    Row,
    run_ab,
    select_names,
    workload_names,
)
from ..measuring import DeviceError, counted, min_samples_for, open_device
from ..results import Fingerprint, collect
from ._asv import Commit, write_points
from ._asv_files import ANCHORED, CI, Point
from ._record import HistoryError, Layout

__all__ = ["UNIT", "WIDEST", "AnchoredRecipe", "anchored_name", "point_text", "ratio_point"]

#: The unit asv shows for the ratios.
UNIT: Final = "x anchor"
#: A ratio whose 99% interval is not within this of it, either way, is refused (the module's docstring).
WIDEST: Final = DEFAULT_TOLERANCE
#: What a refused ratio's line says to do.
REMEDY: Final = (
    "a refused ratio is written to asv as no value: measure the commit again with --force and a longer --max-time "
    "(more paired rounds), on a quieter machine"
)


def anchored_name(anchor: str, workload: str) -> str:
    """The asv benchmark of ``workload``'s ratios against ``anchor`` (a commit hash)."""
    return f"{ANCHORED}{anchor[:8]}.{workload}"


def ratio_point(rounds: Sequence[tuple[float, float]], iterations: int, seconds: float, started: int) -> Point:
    """asv's point of one commit: the median of the per-round ratios (commit / anchor) and its 99% interval.

    ``rounds`` are (anchor's, commit's) seconds per call of each paired round. A point whose interval is too wide
    for the history, or that has none (too few rounds), is refused (``Point.refused`` says why)."""
    ratios = tuple(head / base for base, head in rounds if base > 0)
    if not ratios:
        raise ValueError("no round with a positive time of the anchor: nothing to take a ratio of")
    point = Point.of(ratios, iterations, started, seconds)
    why = _too_wide(point)
    return dataclasses.replace(point, refused=why) if why else point


def _too_wide(point: Point) -> str:
    """Why ``point`` is of no use to the history ("" when it is)."""
    low, high, ratio = point.ci_low, point.ci_high, point.median
    if low is None or high is None:
        rounds = counted(len(point.samples), "paired round")
        return f"{rounds}, too few for a {CI:.0%} interval, which needs {min_samples_for(CI)}"
    if ratio > 0 and ratio / (1 + WIDEST) <= low and high <= ratio * (1 + WIDEST):
        return ""
    return (
        f"its {CI:.0%} interval is not within {WIDEST:.0%} of it: the rounds disagree, a {WIDEST:.0%} step would hide"
    )


def point_text(point: Point) -> str:
    """A ratio as the commit's line shows it: ``1.012 [1.004, 1.020]``, its 99% interval; a refused one says why."""
    interval = "" if point.ci_low is None or point.ci_high is None else f" [{point.ci_low:.3f}, {point.ci_high:.3f}]"
    return f"{point.median:.3f}{interval}" + (f" refused ({point.refused})" if point.refused else "")


@dataclass(frozen=True)
class AnchoredRecipe:
    """How ``history record --anchor`` measures one commit: ``ab`` against ``anchor`` (a full hash)."""

    anchor: str
    workloads: Path
    device: str = "auto"
    max_time: float = DEFAULT_MAX_TIME
    select: tuple[str, ...] = ()  # ab's -k patterns

    def check(self, layout: Layout) -> None:
        """Everything that can be checked before measuring: the anchor's workloads module, -k, the device."""
        try:
            names = workload_names(layout.repo, self.anchor, self.workloads)
        except AbError as exc:
            raise HistoryError(f"--anchor {self.anchor[:8]}: {exc}") from None
        if not select_names(names, self.select):
            raise HistoryError(
                f"-k {' -k '.join(self.select)} selects none of the workloads of {self.workloads} at the anchor "
                f"{self.anchor[:8]}; its workloads: {', '.join(names) or 'none'}"
            )
        try:
            open_device(self.device)
        except DeviceError as exc:
            raise HistoryError(f"--device {self.device}: {exc}") from None

    def recorded(self, layout: Layout, commit: str) -> bool:
        """Whether ``commit`` has ratios against this anchor on this machine already."""
        return layout.recorded(commit, anchor=self.anchor)

    def measure(self, layout: Layout, commit: str) -> str:
        """Measure ``commit`` against the anchor with ``ab``, write its ratios; return a one-line outcome."""
        options = AbOptions(
            base=self.anchor,
            head=commit,
            workloads=self.workloads,
            repo=layout.repo,
            device=self.device,
            max_time=self.max_time,
            select=self.select,
            trace="off",
        )
        try:
            result = run_ab(options, out=None)
        except AbError as exc:
            return f"nothing recorded (ab: {exc})"
        return self._write(layout, result)

    def _write(self, layout: Layout, result: AbResult) -> str:
        head = result.head.commit
        started = int(time.time() * 1000)
        points: dict[str, dict[str, Point]] = {}
        code: dict[str, str] = {}
        left: list[str] = []
        for row in result.result.rows:
            point = _point_of(row, started)
            if point is None:
                left.append(f"{row.key} ({row.verdict.value}: {row.reason})")
                continue
            name = anchored_name(self.anchor, row.key)
            points.setdefault(name, {})[row.device] = point
            code[name] = (
                f"# measured by pytest-gpuperf ab: time of {row.key} at this commit / its time at the anchor "
                f"{self.anchor}, in paired rounds (lower is better)\n# workloads module: {result.workloads}"
            )
        # ab's skipped workloads (unsupported on this device on both sides, ...): the reason's head is enough here
        left += [f"{name} ({why.split(': ')[0]})" for name, why in result.result.skipped.items()]
        if not points:
            return "nothing recorded: ab measured no workload on both sides" + (f"; {'; '.join(left)}" if left else "")
        pretty = {name: f"{name} (time / the anchor's, paired rounds; lower is better)" for name in points}
        fingerprint = Fingerprint.from_dict(collect(layout.repo))
        write_points(
            layout.results,
            points,
            code=code,
            pretty=pretty,
            unit=UNIT,
            fingerprint=fingerprint,
            machine=layout.machine,
            commit=Commit(head, commit_time(layout.repo, head) * 1000),
        )
        every = [(name.split(".", 1)[1], p) for name, by in points.items() for p in by.values()]
        ratios = ", ".join(f"{workload} {point_text(p)}" for workload, p in every)
        return (
            f"recorded against {self.anchor[:8]}: {ratios}"
            + (f"; not recorded: {'; '.join(left)}" if left else "")
            + (f"; {REMEDY}" if any(p.refused for _, p in every) else "")
        )


def _point_of(row: Row, started: int) -> Point | None:
    rounds = row.paired
    if rounds is None or not rounds.base:
        return None
    return ratio_point(list(zip(rounds.base, rounds.head, strict=True)), rounds.iterations, rounds.seconds, started)
