"""Peak memory as a gated figure: each side's high-water mark compared, exactly.

The figure is ``Measurement.gated_memory``: on CUDA the allocator's high-water mark of a call, on a CPU the
high-water mark of torch's allocator above the call's start (the process's RSS moves between identical calls
and is never gated). Both are counts of bytes, not times: they do not move with the machine's load, so any
increase is *more*. Where a side's own records disagree (several baseline records), the change is called only
beyond the range they span.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..measuring import Measurement

__all__ = ["MemoryChange", "compare_memory"]


@dataclass(frozen=True)
class MemoryChange:
    """Each side's peak in bytes (the largest of its records), ``change`` ``more``/``less``/``same``, and ``kind``:
    what the figure is (``cuda allocator peak``, ``cpu allocator peak above the call's start``)."""

    base_bytes: int
    head_bytes: int
    change: str
    kind: str

    def to_dict(self) -> dict[str, Any]:
        return {"base_bytes": self.base_bytes, "head_bytes": self.head_bytes, "change": self.change, "kind": self.kind}


def compare_memory(base: Iterable[Measurement], head: Iterable[Measurement]) -> MemoryChange | None:
    """Head's peak against base's, None where a side has no gated figure or the sides' figures are of two kinds."""
    sides = []
    for measurements in (base, head):
        figures = [f for f in (m.gated_memory for m in measurements) if f is not None]
        if not figures:
            return None
        sides.append(figures)
    kinds = {kind for figures in sides for _, kind in figures}
    if len(kinds) != 1:
        return None
    (b_low, b_high), (h_low, h_high) = ((min(n for n, _ in f), max(n for n, _ in f)) for f in sides)
    change = "more" if h_low > b_high else "less" if h_high < b_low else "same"
    return MemoryChange(b_high, h_high, change, kinds.pop())
