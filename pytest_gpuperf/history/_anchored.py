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
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._git import commit_time
from ..gate import DEFAULT_MAX_TIME, AbError, AbOptions, AbResult, Row, run_ab, select_names, workload_names
from ..measuring import DeviceError, open_device
from ..results import Fingerprint, collect
from ._asv import Commit, write_points
from ._asv_files import ANCHORED, Point
from ._record import HistoryError, Layout

__all__ = ["UNIT", "AnchoredRecipe", "anchored_name", "ratio_point"]

#: The unit asv shows for the ratios.
UNIT: Final = "x anchor"


def anchored_name(anchor: str, workload: str) -> str:
    """The asv benchmark of ``workload``'s ratios against ``anchor`` (a commit hash)."""
    return f"{ANCHORED}{anchor[:8]}.{workload}"


def ratio_point(rounds: Sequence[tuple[float, float]], iterations: int, seconds: float, started: int) -> Point:
    """asv's point of one commit: the median of the per-round ratios (commit / anchor) and its 99% interval.

    ``rounds`` are (anchor's, commit's) seconds per call of each paired round. Too few rounds for a 99% interval:
    the median alone, as for any measurement (``Point.of``)."""
    ratios = tuple(head / base for base, head in rounds if base > 0)
    if not ratios:
        raise ValueError("no round with a positive time of the anchor: nothing to take a ratio of")
    return Point.of(ratios, iterations, started, seconds)


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
        ratios = ", ".join(
            f"{name.split('.', 1)[1]} {p.median:.3f}" for name, by in points.items() for p in by.values()
        )
        return f"recorded against {self.anchor[:8]}: {ratios}" + (f"; not recorded: {'; '.join(left)}" if left else "")


def _point_of(row: Row, started: int) -> Point | None:
    rounds = row.paired
    if rounds is None or not rounds.base:
        return None
    return ratio_point(list(zip(rounds.base, rounds.head, strict=True)), rounds.iterations, rounds.seconds, started)
