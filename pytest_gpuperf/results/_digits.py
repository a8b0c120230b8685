"""The digits an exported figure keeps: one rule for every exporter (``_export.py``, ``_pytest_benchmark.py``).

A median over many samples carries binary-float noise in its last digits (``26467.230769230773`` ns:
a total of integer nanoseconds divided by a count of calls), which a chart's tooltip or a diff of two
exports shows as if it were measured. Six significant digits keep at least two digits more than any
interval this tool reports supports (the sampler aims at a 1% interval of the median; the tightest
intervals seen are near 0.01%, the 5th digit), and drop the noise: ``26467.2`` ns.

Where a figure is written as text (github-action-benchmark's ``range``), it is in fixed notation
(``exported_text``): ``1385490``, never ``1.38549e+06``.

The samples themselves (pytest-benchmark's ``stats.data``) are written as measured: they are the
evidence the gate reads back from an export, and a reader recomputes its statistics from them.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Final

__all__ = ["EXPORT_DIGITS", "exported", "exported_text"]

#: Significant digits of every figure an export writes (not of the samples).
EXPORT_DIGITS: Final = 6


def exported(value: float) -> float:
    """``value`` rounded to ``EXPORT_DIGITS`` significant digits (an infinity or NaN as it is)."""
    return float(f"{value:.{EXPORT_DIGITS}g}") if math.isfinite(value) else value


def exported_text(value: float) -> str:
    """``exported(value)`` in fixed notation, without trailing zeros: ``1385490``, ``73159.9`` (an infinity or NaN
    as Python writes it)."""
    kept = exported(value)
    if not math.isfinite(kept):
        return str(kept)
    return format(Decimal(repr(kept)).normalize(), "f")
