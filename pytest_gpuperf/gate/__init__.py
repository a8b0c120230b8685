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
    from ._ab import DEFAULT_MAX_TIME, DEFAULT_WORKLOADS, AbOptions, AbResult, select_names, workload_names
    from ._ab import run as run_ab
    from ._ab_load import AbError
    from ._commands import add_ab_option
    from ._commands import add_parsers as add_gate_commands
    from ._compare import (
        BaselineNoise,
        GateResult,
        Row,
        baseline_noise,
        compare_runs,
        row_runs,
    )
    from ._confirm import CONFIRMATION_ENV
    from ._confirm import run as run_confirmation
    from ._evidence import RunSamples, disturbed, work_difference
    from ._render import (
        CLOCK_HEADER,
        append_summary,
        clock_ratio_cell,
        gate_lines,
        gate_table,
        ratio_cell,
        report_to_github,
        runs_cell,
        seen_cell,
        verdict_cell,
        why_cells,
        why_heading,
        why_lines,
    )
    from ._rule import (
        DEFAULT_NOISE_FLOOR,
        DEFAULT_TOLERANCE,
        OUTLIER_FLOORS,
        POWER,
        PRIOR_DF,
        Policy,
        describe_tolerance,
        detectable,
        detection_target,
        estimate,
        percent,
        reason_for,
        seconds_to_see,
        stored_tolerance,
        tolerance_for,
        verdict_for,
    )
    from ._traces import baseline_side, rows_to_trace, trace_records, trace_rows
    from ._verdicts import (
        DEFAULT_FAIL_ON,
        MORE_WORK,
        VERDICTS,
        WORK_NAMES,
        Verdict,
        parse_verdicts,
    )

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "CLOCK_HEADER",
    "CONFIRMATION_ENV",
    "DEFAULT_FAIL_ON",
    "DEFAULT_MAX_TIME",
    "DEFAULT_NOISE_FLOOR",
    "DEFAULT_TOLERANCE",
    "DEFAULT_WORKLOADS",
    "MORE_WORK",
    "OUTLIER_FLOORS",
    "POWER",
    "PRIOR_DF",
    "VERDICTS",
    "WORK_NAMES",
    "AbError",
    "AbOptions",
    "AbResult",
    "BaselineNoise",
    "GateResult",
    "Policy",
    "Row",
    "RunSamples",
    "Verdict",
    "add_ab_option",
    "add_gate_commands",
    "append_summary",
    "baseline_noise",
    "baseline_side",
    "clock_ratio_cell",
    "compare_runs",
    "describe_tolerance",
    "detectable",
    "detection_target",
    "disturbed",
    "estimate",
    "gate_lines",
    "gate_table",
    "parse_verdicts",
    "percent",
    "ratio_cell",
    "reason_for",
    "report_to_github",
    "row_runs",
    "rows_to_trace",
    "run_ab",
    "run_confirmation",
    "runs_cell",
    "seconds_to_see",
    "seen_cell",
    "select_names",
    "stored_tolerance",
    "tolerance_for",
    "trace_records",
    "trace_rows",
    "verdict_cell",
    "verdict_for",
    "why_cells",
    "why_heading",
    "why_lines",
    "work_difference",
    "workload_names",
]
