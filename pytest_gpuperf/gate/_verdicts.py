"""The verdicts a comparison can reach, and the parser of ``--gpuperf-fail-on``/``--fail-on``'s list of them."""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["DEFAULT_FAIL_ON", "VERDICTS", "Verdict", "parse_verdicts"]


class Verdict(str, enum.Enum):
    SLOWER = "slower"
    #: significant and beyond the tolerance, but every current run was measured while the machine was busy, or
    #: the current GPU's lower SM clock explains it (the clock-normalised ratio shows no slowdown)
    UNATTRIBUTED = "unattributed"
    FASTER = "faster"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    INCOMPARABLE = "incomparable"
    NEW = "new"
    MISSING = "missing"


VERDICTS: Final = tuple(v.value for v in Verdict)
#: A slowdown fails whether or not it can be told from the machine's load or the GPU's clocks: a gate that
#: passed every slowdown measured while CI runners were busy would never fire.
DEFAULT_FAIL_ON: Final = (Verdict.SLOWER.value, Verdict.UNATTRIBUTED.value)


def parse_verdicts(raw: str) -> tuple[str, ...]:
    """``"slower,missing"`` -> ("slower", "missing"); ``none`` -> (). Raises ValueError naming a bad one."""
    text = raw.strip().lower()
    if text in ("", "none"):
        return ()
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if part not in VERDICTS:
            raise ValueError(f"{part!r} is not a verdict; use a comma list of {', '.join(VERDICTS)}, or none")
        if part not in out:
            out.append(part)
    return tuple(out)
