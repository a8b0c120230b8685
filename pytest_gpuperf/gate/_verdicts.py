"""The verdicts a comparison can reach, and the parser of ``--gpuperf-fail-on``/``--fail-on``'s list of them.

Beside the verdicts, the list takes the names of what a step's work can grow in: the count categories
(``CATEGORIES``, which ``measuring.compare_work`` compares) and ``memory`` (its peak); each fails only where it
went up. Kept apart from the rest of the gate, so that loading the plugin imports nothing of its machinery.
"""

from __future__ import annotations

import enum
from typing import Final

from ..measuring import CATEGORIES

__all__ = [
    "DEFAULT_FAIL_ON",
    "VERDICTS",
    "WORK_NAMES",
    "Verdict",
    "describe_fail_on",
    "parse_verdicts",
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
#: What the step's work can grow in: each count category, and its peak memory.
WORK_NAMES: Final = (*CATEGORIES, "memory")
FAIL_ON_NAMES: Final = (*VERDICTS, *WORK_NAMES)
#: A slowdown fails whether or not it can be told from the machine's load or the GPU's clocks: a gate that
#: passed every slowdown measured while CI runners were busy would never fire. More work (a count or the peak
#: memory went up) fails too: noise cannot move a count, so such a change is the code's whatever the clock says.
DEFAULT_FAIL_ON: Final = (Verdict.SLOWER.value, Verdict.UNATTRIBUTED.value, *WORK_NAMES)


def describe_fail_on(fail_on: frozenset[str] | set[str]) -> str:
    """``slower,unattributed + more ops,flops``; every work name at once reads ``+ more work (any count, memory)``."""
    verdicts = ",".join(sorted(n for n in fail_on if n not in WORK_NAMES))
    work = [n for n in WORK_NAMES if n in fail_on]
    if not work:
        return verdicts or "none"
    more = "more work (any count, memory)" if len(work) == len(WORK_NAMES) else f"more {','.join(work)}"
    return f"{verdicts} + {more}" if verdicts else more


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
            f"and of work categories ({', '.join(WORK_NAMES)}), none to report without failing, or leave the "
            "option out for the default"
        )
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if part not in FAIL_ON_NAMES:
            raise ValueError(
                f"{part!r} is not a verdict or a work category; use a comma list of verdicts "
                f"({', '.join(VERDICTS)}) and categories of work that fail where they went up "
                f"({', '.join(WORK_NAMES)}), or none"
            )
        if part not in out:
            out.append(part)
    return tuple(out)
