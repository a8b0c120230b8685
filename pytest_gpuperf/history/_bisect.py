"""A step in the history, confirmed by ``ab`` and bisected with ``ab`` to the commit that made it.

Every measurement here is one ``ab`` pair (``Pair``: base commit, head commit -> ``Probe``),
the gate's own paired rounds on this machine, so that a step is called only when the two
commits, measured side by side, differ beyond the tolerance.

* **Confirmation.** The candidate step's two commits (the last before it, the first after) are
  measured as a pair; the step stands only when ``ab`` calls the after side slower (or faster).
  A creep (1% a commit) is no step between neighbours: when the neighbours do not differ, the
  pair is widened once to the ends of the segments the detector compared (from the change before
  to the change after), and a step found there is bisected like any other.
* **Bisection.** Over the first-parent commits between the two (a merge is one commit there: the
  branch it brought in, as a whole), each probe measures the probe commit against the step's
  *base*, never against its neighbour, so that every probe asks the same question, "is the change
  in yet?", of a change as large as the confirmed one. ``unchanged`` sends the search later, the
  confirmed direction earlier. Any other answer (inconclusive, the opposite way) is asked once
  more from the other end (the probe against the step's head); an answer there decides. A commit
  that differs significantly from both ends, each time under the tolerance, is part of the way (a
  creep, below). Any other pair of non-answers (intervals too wide: the machine too noisy for the
  rounds given; a commit whose workloads module ab cannot load) stops the bisection, which says
  which commits are left rather than guess.
* **The culprit's own pair.** When one commit remains, it is measured against its parent. A
  commit that alone makes the step is *the* culprit; one that does not is the commit where a
  creep crossed the tolerance.
* **A creep.** A commit part of the way (significantly off both the base and the head, each time
  under the tolerance), or a last commit that is not the step alone, makes the step a creep: its
  ends are bisected too, the first commit off the base's level (against the base) and the first at
  the head's (against the head), and the creep is reported over them.

With 64 commits between the step's ends a culprit takes 1 + 6 + 1 = 8 ``ab`` runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "Culprit",
    "Pair",
    "Probe",
    "Span",
    "hunt_span",
]

#: ``ab``'s verdicts that count as each direction. A slowdown measured while the machine was busy
#: (unattributed, same-work) is still a slowdown of these two commits, measured in the same rounds.
DIRECTIONS: Final = {
    "slower": frozenset({"slower", "unattributed", "same-work"}),
    "faster": frozenset({"faster"}),
}


@dataclass(frozen=True)
class Probe:
    """One ``ab`` pair: ``head`` measured against ``base`` in paired rounds, and what ``ab`` said."""

    base: str
    head: str
    verdict: str  # ab's verdict: slower, faster, unchanged, inconclusive, unattributed ...
    ratio: float | None = None  # head / base, the median of the rounds' ratios
    low: float | None = None
    high: float | None = None
    rounds: int = 0
    reason: str = ""
    #: what the probe asked: "confirm", "widen", "probe", "probe (from head)", "culprit"
    role: str = ""

    def text(self) -> str:
        """``1a2b3c4d..5e6f7a8b 1.251 [1.203, 1.302] slower (38 rounds)``."""
        ratio = "" if self.ratio is None else f" {self.ratio:.3f} [{self.low or 0:.3f}, {self.high or 0:.3f}]"
        rounds = f" ({self.rounds} rounds)" if self.rounds else ""
        return f"{self.base[:8]}..{self.head[:8]}{ratio} {self.verdict}{rounds}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "base": self.base,
            "head": self.head,
            "verdict": self.verdict,
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "rounds": self.rounds,
            "reason": self.reason,
        }


#: Measure ``head`` against ``base`` (full commit hashes) with ``ab``; the probe's ``role`` is set by the caller.
Pair = Callable[[str, str], Probe]


@dataclass(frozen=True)
class Span:
    """A candidate step: ``commits`` are the first-parent commits after ``base`` up to ``head`` (its last).

    ``wide_base``/``wide_commits``: the wider range tried when the neighbours do not differ (a creep), the
    ends of the segments the detector compared; empty when there is none wider.
    """

    base: str
    commits: tuple[str, ...]
    wide_base: str = ""
    wide_commits: tuple[str, ...] = ()

    @property
    def head(self) -> str:
        return self.commits[-1]


@dataclass(frozen=True)
class Culprit:
    """What the hunt found for one step.

    ``kind``: ``commit`` (one commit makes the step alone), ``creep`` (the change builds up over
    ``first``..``last``; ``commit``, when found, is where it crossed the tolerance), ``unresolved`` (a probe
    answered neither way from either end: the culprit is one of ``first``..``last``), ``unconfirmed`` (``ab`` found no
    step between the step's ends: nothing to report).
    """

    kind: str
    direction: str  # slower / faster, as confirmed ("" when unconfirmed)
    commit: str  # the culprit, or where a creep crossed the tolerance ("" when none)
    first: str  # the suspects left: the first-parent commits first..last (inclusive)
    last: str
    probes: tuple[Probe, ...] = field(default_factory=tuple)

    @property
    def confirmed(self) -> bool:
        return self.kind != "unconfirmed"

    @property
    def runs(self) -> int:
        return len(self.probes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "direction": self.direction,
            "commit": self.commit or None,
            "first": self.first or None,
            "last": self.last or None,
            "ab_runs": self.runs,
            "probes": [p.to_dict() for p in self.probes],
        }


def direction_of(verdict: str) -> str:
    """``slower``, ``faster`` or "" for an ``ab`` verdict."""
    return next((name for name, verdicts in DIRECTIONS.items() if verdict in verdicts), "")


class _Hunt:
    """The probes of one step, recorded in order."""

    def __init__(self, pair: Pair) -> None:
        self._pair = pair
        self.probes: list[Probe] = []

    def ask(self, base: str, head: str, role: str) -> Probe:
        probe = dataclasses.replace(self._pair(base, head), base=base, head=head, role=role)
        self.probes.append(probe)
        return probe


def hunt_span(step: Span, pair: Pair) -> Culprit:
    """Confirm ``step`` with ``ab``, bisect it to one commit, and check that commit against its first parent."""
    run = _Hunt(pair)
    base, commits = step.base, step.commits
    direction = direction_of(run.ask(base, step.head, "confirm").verdict)
    if not direction and step.wide_commits:
        base, commits = step.wide_base, step.wide_commits
        direction = direction_of(run.ask(base, commits[-1], "widen").verdict)
    if not direction:
        return Culprit("unconfirmed", "", "", step.commits[0], step.head, tuple(run.probes))
    good, bad, inside = _bisect(base, commits, direction, run)
    if inside is not None:  # a commit part of the way from base to head: the change builds up
        first, last = _edges(base, commits, good, inside, run)
        return Culprit("creep", direction, "", first, last, tuple(run.probes))
    if bad - good > 1:  # a probe unanswered (noise, a commit ab cannot load): the culprit is one of those left
        return Culprit("unresolved", direction, "", commits[good + 1], commits[bad], tuple(run.probes))
    culprit = commits[bad]
    parent = commits[bad - 1] if bad > 0 else base  # its first parent: commits are in first-parent order
    # A pair already measured (the confirmation of a step one commit wide, the last probe) is not measured again.
    known = next((p for p in run.probes if (p.base, p.head) == (parent, culprit)), None)
    if direction_of((known or run.ask(parent, culprit, "culprit")).verdict) == direction:
        return Culprit("commit", direction, culprit, culprit, culprit, tuple(run.probes))
    # Not slower than its parent on its own: the commit where a creep crossed the tolerance.
    first, last = _edges(base, commits, good, bad, run)
    return Culprit("creep", direction, culprit, first, last, tuple(run.probes))


def _bisect(base: str, commits: Sequence[str], direction: str, run: _Hunt) -> tuple[int, int, int | None]:
    """The last index known good (-1: the base), the first known bad, and the index of a commit found part of
    the way (neither the base's level nor the head's: inconclusive from both ends), or None.

    Invariant: ``commits[bad]`` differs from ``base`` in ``direction``; ``commits[good]`` (or the base) does not.
    The two are one apart at the end, unless a commit was found part of the way or a probe failed.
    """
    good, bad = -1, len(commits) - 1
    head = commits[-1]
    while bad - good > 1:
        mid = (good + bad) // 2
        answer = run.ask(base, commits[mid], "probe").verdict
        if direction_of(answer) == direction:
            bad = mid
            continue
        if answer == "unchanged":
            good = mid
            continue
        # Not answered from the base: ask from the head, where the change is the whole step or none of it.
        again = run.ask(commits[mid], head, "probe (from head)")
        if direction_of(again.verdict) == direction:
            good = mid
        elif again.verdict == "unchanged":
            bad = mid
        else:
            part_way = all(_significant(p, direction) for p in run.probes[-2:])
            return good, bad, mid if part_way else None
    return good, bad, None


def _significant(probe: Probe, direction: str) -> bool:
    """Is ``probe``'s interval wholly on ``direction``'s side of 1 (a change, if under the tolerance)? Two such
    probes put a commit part of the way; a wide interval (noise) does not."""
    if probe.low is None or probe.high is None:
        return False
    return probe.low > 1.0 if direction == "slower" else probe.high < 1.0


def _edges(base: str, commits: Sequence[str], good: int, inside: int, run: _Hunt) -> tuple[str, str]:
    """A creep's first and last commits: the first that is not at the base's level (searched between ``good``
    and ``inside``, against the base) and the first at the head's level (after ``inside``, against the head)."""
    low, high = good, inside
    while high - low > 1:
        mid = (low + high) // 2
        if run.ask(base, commits[mid], "creep start").verdict == "unchanged":
            low = mid
        else:
            high = mid
    first = commits[low + 1]
    low, high = inside, len(commits) - 1
    while high - low > 1:
        mid = (low + high) // 2
        if run.ask(commits[mid], commits[-1], "creep end").verdict == "unchanged":
            high = mid
        else:
            low = mid
    return first, commits[high]
