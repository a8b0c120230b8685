"""The gate: the verdict rule, the evidence model, the stored-baseline comparison, ``ab``, confirmation runs,
and the one renderer of their result.

Every route (``pytest --gpuperf-compare``, ``pytest-gpuperf compare``, ``pytest-gpuperf ab``)
produces a ``GateResult`` of ``Row``s judged by ``verdict_for``; ``docs/how-the-gate-decides.md``
is the one statement of the rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from ._ab import AbOptions, AbResult
    from ._ab_load import AbError
    from ._commands import add_parsers as add_gate_commands
    from ._compare import BaselineNoise, GateResult, PairedRounds, Row, baseline_noise, compare_runs, count_verdicts
    from ._confirm import CONFIRMATION_ENV
    from ._confirm import run as run_confirmation
    from ._evidence import disturbed, work_difference
    from ._render import (
        CLOCK_HEADER,
        clock_ratio_cell,
        gate_lines,
        gate_table,
        ratio_cell,
        report_to_github,
        runs_cell,
        verdict_cell,
        why_cells,
        why_heading,
        why_lines,
        why_markdown,
    )
    from ._rule import (
        DEFAULT_NOISE_FLOOR,
        DEFAULT_TOLERANCE,
        OUTLIER_FLOORS,
        PRIOR_DF,
        UNCHANGED_REACH,
        Policy,
        estimate,
        reason_for,
        verdict_for,
    )
    from ._verdicts import VERDICTS, Verdict, parse_verdicts
    from ._why import EXPLAINED_VERDICTS, Attribution, WhyLine, attribute

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "CLOCK_HEADER",
    "CONFIRMATION_ENV",
    "DEFAULT_NOISE_FLOOR",
    "DEFAULT_TOLERANCE",
    "EXPLAINED_VERDICTS",
    "OUTLIER_FLOORS",
    "PRIOR_DF",
    "UNCHANGED_REACH",
    "VERDICTS",
    "AbError",
    "AbOptions",
    "AbResult",
    "Attribution",
    "BaselineNoise",
    "GateResult",
    "PairedRounds",
    "Policy",
    "Row",
    "Verdict",
    "WhyLine",
    "add_gate_commands",
    "attribute",
    "baseline_noise",
    "clock_ratio_cell",
    "compare_runs",
    "count_verdicts",
    "disturbed",
    "estimate",
    "gate_lines",
    "gate_table",
    "parse_verdicts",
    "ratio_cell",
    "reason_for",
    "report_to_github",
    "run_confirmation",
    "runs_cell",
    "verdict_cell",
    "verdict_for",
    "why_cells",
    "why_heading",
    "why_lines",
    "why_markdown",
    "work_difference",
]
