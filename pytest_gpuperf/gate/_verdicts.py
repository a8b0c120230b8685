"""The verdicts a comparison can reach, and the parser of ``--gpuperf-fail-on``/``--fail-on``'s list of them.

Beside the verdicts, the list takes the names of what a step's work can grow in: the count categories
(``CATEGORIES``, which ``measuring.compare_work`` compares) and ``memory`` (its peak); each fails only where it
went up. ``more-work``, the default's, is every one of them on a row whose timing did not clear it: not measured
unchanged or faster (``work_fail_on``). Kept apart from the rest of the gate, so that loading the plugin imports
nothing of its machinery.
"""

from __future__ import annotations

import enum
from typing import Final

from ..measuring import CATEGORIES

__all__ = [
    "CLEARED",
    "DEFAULT_FAIL_ON",
    "MORE_WORK",
    "NOT_COMPARED",
    "VERDICTS",
    "WORK_NAMES",
    "Verdict",
    "describe_fail_on",
    "parse_verdicts",
    "work_fail_on",
]


class Verdict(str, enum.Enum):
    SLOWER = "slower"
    #: significant and beyond the tolerance, but every current run was measured while the machine was busy, or
    #: the current GPU's lower SM clock explains it (the clock-normalised ratio shows no slowdown)
    UNATTRIBUTED = "unattributed"
    #: unattributed, and every count of the step's work is identical on both sides: the machine changed, not
    #: what the step does (not in the default fail-on: name it to fail on it)
    SAME_WORK = "same-work"
    FASTER = "faster"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    INCOMPARABLE = "incomparable"
    NEW = "new"
    MISSING = "missing"


VERDICTS: Final = tuple(v.value for v in Verdict)
#: The verdicts of a row that was not compared: no ratio of it was judged. A gate of such rows alone fails.
NOT_COMPARED: Final = (Verdict.INCOMPARABLE, Verdict.NEW, Verdict.MISSING)
#: What the step's work can grow in: each count category, and its peak memory.
WORK_NAMES: Final = (*CATEGORIES, "memory")
#: Every work name, on a row whose timing did not clear it (``work_fail_on``).
MORE_WORK: Final = "more-work"
FAIL_ON_NAMES: Final = (*VERDICTS, *WORK_NAMES, MORE_WORK)
#: The timing verdicts that clear more work under ``more-work``: a step measured as fast as before or faster at
#: the tolerance did more work to no cost in time (sparse embedding gradients: more ops, a faster step).
CLEARED: Final = (Verdict.UNCHANGED.value, Verdict.FASTER.value)
#: A slowdown fails whether or not it can be told from the machine's load or the GPU's clocks: a gate that
#: passed every slowdown measured while CI runners were busy would never fire. More work (a count or the peak
#: memory went up) fails where the clock could not clear it: noise cannot move a count, so where the timing cannot
#: tell (inconclusive) the counts do; naming a category fails it whatever the timing says.
DEFAULT_FAIL_ON: Final = (Verdict.SLOWER.value, Verdict.UNATTRIBUTED.value, MORE_WORK)


def work_fail_on(fail_on: frozenset[str], verdict: str) -> frozenset[str]:
    """The names that fail a row of this timing ``verdict`` where what they name went up (what each reading's
    ``Change.failing`` is given): those of ``fail_on``, and under ``more-work`` every work name, unless the row was
    measured unchanged or faster."""
    return fail_on | frozenset(WORK_NAMES) if MORE_WORK in fail_on and verdict not in CLEARED else fail_on


def describe_fail_on(fail_on: frozenset[str] | set[str]) -> str:
    """``slower,unattributed + more ops,flops``; every work name at once reads ``+ more work (any count, memory)``,
    and ``more-work`` ``+ more work unless measured unchanged or faster``."""
    verdicts = ",".join(sorted(n for n in fail_on if n not in (*WORK_NAMES, MORE_WORK)))
    work = [n for n in WORK_NAMES if n in fail_on]
    parts = [verdicts] if verdicts else []
    if work:
        parts.append("more work (any count, memory)" if len(work) == len(WORK_NAMES) else f"more {','.join(work)}")
    if MORE_WORK in fail_on and len(work) < len(WORK_NAMES):
        parts.append("more work unless measured unchanged or faster")
    return " + ".join(parts) or "none"


def parse_verdicts(raw: str) -> tuple[str, ...]:
    """``"slower,missing,ops"`` -> ("slower", "missing", "ops"); ``none`` -> (). Raises ValueError naming a bad one
    and listing the valid ones, and for an empty value: given on purpose (``--fail-on ''``, an unset shell
    variable), it would turn the gate off where only ``none`` says so."""
    text = raw.strip().lower()
    if text == "none":
        return ()
    if not text:
        raise ValueError(
            f"is empty, which would turn the gate off; give a comma list of verdicts ({', '.join(VERDICTS)}) "
            f"and of work categories ({', '.join(WORK_NAMES)}, {MORE_WORK}), none to report without failing, or "
            "leave the option out for the default"
        )
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if part not in FAIL_ON_NAMES:
            raise ValueError(
                f"{part!r} is not a verdict or a work category; use a comma list of verdicts "
                f"({', '.join(VERDICTS)}) and categories of work that fail where they went up "
                f"({', '.join(WORK_NAMES)}), {MORE_WORK} (any of them, on a row not measured unchanged or faster), "
                "or none"
            )
        if part not in out:
            out.append(part)
    return tuple(out)
