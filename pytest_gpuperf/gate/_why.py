"""Why a row got slower: the ops and kernels whose time per call grew the most, from both sides' work profiles.

Each side's profiles (``measuring.WorkProfile``, taken after timing) give every aten op's self time and every CUDA
kernel's device time over the profiled calls; a side's time per call of a line is averaged over its profiles
(each profile's total / its ``calls``), and so is its count per call. The lines whose count per call changed (work
added or removed; the counts are exact) rank first, then those whose count did not (their time only grew: on a
busy machine, often noise); each group by its change in time per call, head minus base, op and kernel lines
together, labelled by kind: a kernel's time and the op that launched it are different resources (the device's, the
host's) and either can be the one that grew.

Python lines name what the profile's Python tracer found in the time outside ops: the built-in functions the step
calls from Python (``Tensor.item``, ``sleep``), each with its own time outside any op (the Python-to-C++ call and
its argument parsing, a sleep; ``WorkProfile.python``), ranked with the rest. An added ``.item()`` in a loop costs
more in that call than in ``aten::item`` itself.

One more line is always there: the time *outside* any op (or, where a side ran kernels, outside any kernel), which
is the side's measured time per call (the timed samples, not the profiled calls) minus the time of its ops and
Python lines (or its kernels). The Python code itself, the host's own work, a wait for the device, launches:
whatever no profiled op or named built-in holds.

A profiled call is slower than a timed one (the profiler records every op), and few calls are profiled (one where
the budget allows no more), each as noisy as one call is: on this project's shared 2-vCPU machine, calls of a
step timed at 1.7 to 3.3 ms took 1.6 to 10 ms under the profiler. So each side's op times are scaled to its measured
time by the profiled calls' own wall time (``WorkProfile.call_seconds``): ``op seconds x measured / profiled
call``, and the outside line is the profiled calls' time in no op, scaled alike. A side whose profiles do not all keep
that time (one at level ``counts``) is scaled only where its ops alone took longer than the measured call
(``measured / ops``, which leaves nothing outside them), and read as it is otherwise. Kernels' device times are
never scaled: the profiler barely slows the device.

``slowdown_seconds`` is head minus base per call; a line's ``share`` is its change over the slowdown (it may
exceed 1, or be negative, where other lines got faster); ``explained`` is the sum of the shares of the top lines
(those whose time grew, in the order above, at most ``top`` of them, the outside line among them when it ranks
there). The lines that got faster are shown after them (at most ``top``, work removed first, then the largest
drop: a replaced op's old one), and ``faster`` adds up the shares of all of them: the shares of every line add up
to all of the slowdown, so a share above 1 is that much taken back by lines that got faster, which the heading
says (``gate/_render.py``).

Where the row's own interval is given (``interval_seconds``: the slowdown's, in seconds per call, the baseline's
time times the ratio interval's ends less one), a line whose count did not change and whose time changed by no
more than the distance from the slowdown to the interval's nearer end (``noise_seconds``) neither ranks nor is
shown as faster: had the whole row changed by that much, its interval would not tell it from no change (a growth
against the distance down to the low end, a drop against the distance up to the high end; the nearer end holds for
both, where a paired ratio's interval of order statistics is far from symmetric). A profile keeps one time per op
over its one to five calls, and a side has one profile per record (``ab``: one), so an op has no spread of its own
to judge its change by; the timed samples, more of them and less noisy than the profiled calls, cannot separate a
change that small from noise, so the op times cannot either. ``within_noise`` says how many lines moved
so little (the heading says it too); of them only the outside line is shown, as it always is. A line whose count
changed always ranks: counts are exact.

A row whose timing is inconclusive but whose work went up (a count per call rose: it fails on counts) gets a why
of its count lines only (``counts_only``): each line whose count changed, with its time per call on both sides,
and the outside line; nothing ranks and no share is given, since the times did not call a slowdown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..measuring import OpStat, WorkProfile

__all__ = ["COUNTED_VERDICT", "EXPLAINED_VERDICTS", "TOP", "Attribution", "WhyLine", "attribute", "why_for"]

#: The verdicts whose rows get a "why" (a verdict whose estimate says slower).
EXPLAINED_VERDICTS: Final = frozenset({"slower", "unattributed", "same-work"})
#: The verdict whose rows get a why of their count lines only, where their work went up (``counts_only``).
COUNTED_VERDICT: Final = "inconclusive"
#: How many lines rank (the outside line is shown as well when it does not rank among them).
TOP: Final = 5
#: The lines whose times are the host's (scaled to the timed call): ops, and built-ins called from Python.
_HOST: Final = frozenset({"op", "python"})
#: The names of the outside line, by what the side's time is held by.
OUTSIDE_OPS: Final = "outside any op"
OUTSIDE_KERNELS: Final = "outside any kernel"


@dataclass(frozen=True)
class WhyLine:
    """One op, kernel, or the time outside them: its time per call on each side (seconds) and its change;
    ``share``: the change over the row's slowdown; counts per call on each side (None for the outside line)."""

    kind: str  # "op", "kernel", "python" or "outside"
    name: str
    base_seconds: float
    head_seconds: float
    share: float
    base_count: float | None = None
    head_count: float | None = None

    @property
    def delta_seconds(self) -> float:
        return self.head_seconds - self.base_seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "base_seconds": self.base_seconds,
            "head_seconds": self.head_seconds,
            "delta_seconds": self.delta_seconds,
            "share": self.share,
            "base_count": self.base_count,
            "head_count": self.head_count,
        }


@dataclass(frozen=True)
class Attribution:
    """A row's "why": its slowdown per call, the lines shown (the top ones that grew, then the top ones that got
    faster, then the outside line where it is neither), the share of the slowdown the top lines explain, how many
    lines rank (the first ones), and the share the lines that got faster took back."""

    slowdown_seconds: float
    lines: tuple[WhyLine, ...]
    explained: float
    ranked: int = 0
    #: the shares of every line that got faster, added up (0 or less): with ``explained`` and the lines that grew
    #: but did not rank, the shares add up to all of the slowdown; where a share passes 100%, this is why
    faster: float = 0.0
    #: the row's own interval of the slowdown, in seconds per call (None: not given); and how many lines whose count
    #: did not change moved by no more than ``noise_seconds``, which do not rank (nor show, but the outside line):
    #: noise, as far as the times can tell
    interval_seconds: tuple[float, float] | None = None
    within_noise: int = 0
    #: a why of the lines whose count changed only, with their times (an inconclusive row whose work went up)
    counts_only: bool = False

    @property
    def noise_seconds(self) -> float | None:
        """The least change per call the row's interval tells from none: the distance from the slowdown to the
        interval's nearer end (None without an interval)."""
        return _nearer_end(self.slowdown_seconds, self.interval_seconds)

    @property
    def outside(self) -> WhyLine:
        return next(line for line in self.lines if line.kind == "outside")

    def to_dict(self) -> dict[str, Any]:
        return {
            "slowdown_seconds": self.slowdown_seconds,
            "lines": [line.to_dict() for line in self.lines],
            "explained": self.explained,
            "noise_seconds": self.noise_seconds,
            "counts_only": self.counts_only,
        }


@dataclass(frozen=True)
class _Side:
    """One side's time and count per call of every line, averaged over its timed profiles."""

    times: Mapping[tuple[str, str], float]
    counts: Mapping[tuple[str, str], float]
    outside: float
    outside_name: str


def _timed(profile: WorkProfile) -> bool:
    stats: Iterable[OpStat] = (*profile.ops, *profile.kernels)
    return profile.level != "counts" and profile.calls > 0 and all(s.seconds is not None for s in stats)


def _side(profiles: Sequence[WorkProfile], seconds: float) -> _Side | None:
    timed = [p for p in profiles if _timed(p)]
    if not timed:
        return None
    times: dict[tuple[str, str], float] = {}
    counts: dict[tuple[str, str], float] = {}
    walls: list[float] = []
    for profile in timed:
        if profile.call_seconds is not None and profile.call_seconds > 0:
            walls.append(profile.call_seconds / profile.calls)
        for kind, stats in (("op", profile.ops), ("kernel", profile.kernels), ("python", profile.python)):
            for stat in stats:
                key = (kind, stat.name)
                times[key] = times.get(key, 0.0) + (stat.seconds or 0.0) / profile.calls / len(timed)
                counts[key] = counts.get(key, 0.0) + stat.count / profile.calls / len(timed)
    ops = sum(t for (kind, _), t in times.items() if kind == "op")
    if len(walls) == len(timed):  # every profile says how long its calls took: scale them to the timed call
        scale = seconds / (sum(walls) / len(walls))
    else:  # a profile without its calls' time (level counts): the ops' time bounds the call's (none holds more)
        scale = min(1.0, seconds / ops) if ops > 0 else 1.0
    times = {key: t * scale if key[0] in _HOST else t for key, t in times.items()}
    kernels = any(kind == "kernel" for kind, _ in times)
    held = sum(t for (kind, _), t in times.items() if (kind == "kernel" if kernels else kind in _HOST))
    outside = seconds - held
    if abs(outside) <= 1e-9 * seconds:  # ops scaled to the whole call: nothing outside, not a rounding residue
        outside = 0.0
    return _Side(times, counts, outside, OUTSIDE_KERNELS if kernels else OUTSIDE_OPS)


def attribute(
    base: Sequence[WorkProfile],
    head: Sequence[WorkProfile],
    base_seconds: float,
    head_seconds: float,
    *,
    top: int = TOP,
    interval_seconds: tuple[float, float] | None = None,
    counts_only: bool = False,
) -> Attribution | None:
    """The "why" of a change from ``base_seconds`` to ``head_seconds`` per call (see the module's docstring);
    ``interval_seconds``: the row's own interval of that change per call; ``counts_only``: the lines whose count
    changed only. None where a side has no profile with times (level ``counts``, or none at all)."""
    b, h = _side(base, base_seconds), _side(head, head_seconds)
    if b is None or h is None:
        return None
    slowdown = head_seconds - base_seconds
    noise_seconds = _nearer_end(slowdown, interval_seconds)

    def share(delta: float) -> float:
        return delta / slowdown if slowdown > 0 else 0.0

    lines = [
        WhyLine(
            kind,
            name,
            b.times.get((kind, name), 0.0),
            h.times.get((kind, name), 0.0),
            share(h.times.get((kind, name), 0.0) - b.times.get((kind, name), 0.0)),
            b.counts.get((kind, name), 0.0),
            h.counts.get((kind, name), 0.0),
        )
        for kind, name in sorted({*b.times, *h.times})
    ]
    name = h.outside_name if h.outside_name == b.outside_name else f"{OUTSIDE_OPS} or kernel"
    outside = WhyLine("outside", name, b.outside, h.outside, share(h.outside - b.outside))
    # work added or removed ranks first (issue 35: a bicubic upsample, the only op of changed count, ranked under
    # convolutions of the same count that took longer on a busy machine), then by time
    ranked = sorted(
        [*lines, outside], key=lambda line: (not _count_changed(line), -line.delta_seconds, line.kind, line.name)
    )

    def cause(line: WhyLine) -> bool:
        """Counts are exact; a time change only where it is more than the row's times can tell from noise."""
        if _count_changed(line):
            return True
        return not counts_only and (noise_seconds is None or abs(line.delta_seconds) > noise_seconds)

    noise = [line for line in (*lines, outside) if not cause(line) and not _same(line.base_seconds, line.head_seconds)]
    shown = [line for line in ranked if line.delta_seconds > 0 and cause(line)][:top]
    explained = 0.0 if counts_only else sum(line.share for line in shown)
    # the lines that got faster follow (a replaced op's old one), work removed first, the largest drop first
    fell = [line for line in ranked if line.delta_seconds < 0]
    faster = sum(line.share for line in fell)
    fell = sorted(fell, key=lambda line: (not _count_changed(line), line.delta_seconds, line.kind, line.name))
    fell = [line for line in fell if cause(line)][:top]
    lines_shown = [*shown, *fell]
    lines_shown = lines_shown if outside in lines_shown else [*lines_shown, outside]
    ranks = 0 if counts_only else len(shown)
    within = 0 if counts_only else len(noise)
    return Attribution(slowdown, tuple(lines_shown), explained, ranks, faster, interval_seconds, within, counts_only)


def _nearer_end(slowdown: float, interval: tuple[float, float] | None) -> float | None:
    """The distance from ``slowdown`` to the nearer end of its ``interval`` (None without one)."""
    if interval is None:
        return None
    low, high = interval
    return max(0.0, min(slowdown - low, high - slowdown))


def _same(base: float, head: float) -> bool:
    """Whether two times per call are the same but for a rounding residue (the outside line is a difference)."""
    return math.isclose(base, head, rel_tol=1e-9, abs_tol=1e-15)


def _count_changed(line: WhyLine) -> bool:
    """Whether the line's count per call differs between the sides: work added or removed, where a line of the same
    count only took longer (on a busy machine, often noise). The outside line has no count."""
    if line.base_count is None or line.head_count is None:
        return False
    return not math.isclose(line.base_count, line.head_count, rel_tol=1e-9, abs_tol=1e-9)


def why_for(
    verdict: str,
    base: Sequence[WorkProfile],
    head: Sequence[WorkProfile],
    base_seconds: float | None,
    head_seconds: float | None,
    *,
    interval_seconds: tuple[float, float] | None = None,
    more_work: bool = False,
) -> Attribution | None:
    """A row's "why": its attribution where its verdict is one of ``EXPLAINED_VERDICTS``, and its count lines
    where it is ``COUNTED_VERDICT`` and its work went up (``more_work``), both sides timed and profiled with times;
    None otherwise. ``interval_seconds``: the row's own interval of the change per call."""
    counts_only = verdict == COUNTED_VERDICT and more_work
    if (verdict not in EXPLAINED_VERDICTS and not counts_only) or base_seconds is None or head_seconds is None:
        return None
    return attribute(base, head, base_seconds, head_seconds, interval_seconds=interval_seconds, counts_only=counts_only)
