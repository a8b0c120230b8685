"""Counts that noise cannot move: what two sides' work profiles say the step did, compared exactly.

A step's per-call counts (``WorkProfile.per_call_counts``: ops, kernels, runtime calls, syncs, FLOPs, bytes
allocated and copied, compiles) do not move with the machine's load, so they are compared as exact fractions:
any difference is a change of what the step does, whatever the clock says. A count that differs where nothing
changed (autotuning, caches, data-dependent shapes) is *varying*: it differed between the base's own profiles
(several baseline records), between the head's own, or between the profiled calls of one profile (its
``varying`` field), and is never reported as a change.

Pure: profiles in, a ``WorkComparison`` out; ``docs/how-the-gate-decides.md`` states the rule.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from ..measuring import WorkProfile
from ._verdicts import CATEGORIES

__all__ = ["CATEGORIES", "CountChange", "WorkComparison", "category_of", "compare_work"]

#: A key's prefix (before ``:``) or the whole key -> its category.
_CATEGORY_OF: Final = {
    "op": "ops",
    "kernel": "kernels",
    "runtime": "runtime",
    "sync": "syncs",
    "flops": "flops",
    "bytes_allocated": "allocated",
    "bytes_copied": "copied",
    "graph_breaks": "compiles",
    "compiles": "compiles",
}
#: Keys that one side may lack altogether (the counter did not run there): compared only where both sides have
#: them. Every other key absent from a profile counts zero (an op that did not run).
_SCALARS: Final = frozenset({"flops", "bytes_allocated"})


def category_of(key: str) -> str:
    """``op:aten::mm`` -> ``ops``; ``bytes_copied:htod`` -> ``copied``."""
    return _CATEGORY_OF.get(key.split(":", 1)[0], "ops")


@dataclass(frozen=True)
class CountChange:
    """One count per call that differs: the base's and the head's, exact."""

    key: str
    category: str
    base: Fraction
    head: Fraction

    @property
    def name(self) -> str:
        """The key without its prefix (``aten::mm`` for ``op:aten::mm``)."""
        return self.key.split(":", 1)[1] if ":" in self.key and category_of(self.key) != "compiles" else self.key


@dataclass(frozen=True)
class WorkComparison:
    """What the counts of two sides say: ``verdict`` ``same``, ``more`` (some category's total per call went up),
    ``less``, ``different`` (same totals, other keys; or more of some and less of others) or ``unknown`` (no
    count could be compared); ``categories``: each category's own verdict; ``changes``: every differing key,
    by category then size of the change; ``varying``: keys left out as varying; ``compared``: keys compared."""

    verdict: str
    categories: Mapping[str, str]
    changes: tuple[CountChange, ...]
    varying: tuple[str, ...]
    compared: int

    def failing(self, fail_on: Collection[str]) -> list[str]:
        """The categories whose work went up and that are among ``fail_on``."""
        return [c for c, v in self.categories.items() if v == "more" and c in fail_on]

    def to_dict(self, fail_on: Collection[str]) -> dict[str, Any]:
        """The JSON block (``ab --json``): per-call counts as floats, ``failing`` under ``fail_on``."""
        return {
            "verdict": self.verdict,
            "failing": self.failing(fail_on),
            "changes": [
                {"key": c.key, "category": c.category, "base": float(c.base), "head": float(c.head)}
                for c in self.changes
            ],
            "varying": list(self.varying),
        }


def _varying(profiles: Sequence[Mapping[str, Fraction]]) -> set[str]:
    """Keys whose per-call count is not the same in every one of ``profiles`` (a missing op counts zero)."""
    keys = {k for counts in profiles for k in counts}
    return {k for k in keys if len({counts.get(k, Fraction(0)) for counts in profiles}) > 1}


def _category_verdict(changes: Sequence[CountChange]) -> str:
    if not changes:
        return "same"
    base, head = sum(c.base for c in changes), sum(c.head for c in changes)
    return "more" if head > base else "less" if head < base else "different"


def _overall(categories: Mapping[str, str], compared: int) -> str:
    if compared == 0:
        return "unknown"
    changed = {v for v in categories.values() if v != "same"}
    if not changed:
        return "same"
    if "more" in changed:
        return "more"
    return "less" if changed == {"less"} else "different"


def compare_work(base: Sequence[WorkProfile], head: Sequence[WorkProfile]) -> WorkComparison | None:
    """The counts of ``head`` against ``base`` (each side: one profile per record or run), None where a side has
    no profile. A key varying on either side, or listed in any profile's ``varying``, is left out."""
    if not base or not head:
        return None
    base_counts = [p.per_call_counts() for p in base]
    head_counts = [p.per_call_counts() for p in head]
    varying = _varying(base_counts) | _varying(head_counts)
    varying |= {k for p in (*base, *head) for k in p.varying}
    keys = {k for counts in (*base_counts, *head_counts) for k in counts}
    compared = 0
    changes: list[CountChange] = []
    for key in keys - varying:
        if key in _SCALARS and not (key in base_counts[0] and key in head_counts[0]):
            continue
        compared += 1
        b, h = base_counts[0].get(key, Fraction(0)), head_counts[0].get(key, Fraction(0))
        if b != h:
            changes.append(CountChange(key, category_of(key), b, h))
    order = {c: i for i, c in enumerate(CATEGORIES)}
    changes.sort(key=lambda c: (order[c.category], -abs(c.head - c.base), c.key))
    categories = {c: _category_verdict([x for x in changes if x.category == c]) for c in CATEGORIES}
    return WorkComparison(
        _overall(categories, compared), categories, tuple(changes), tuple(sorted(varying & keys)), compared
    )
