"""The gate's table (tabulate): baseline, current, ratio with its interval, verdict and why."""

from __future__ import annotations

from tabulate import tabulate

from .compare import GateResult, Row, Verdict
from .report import short_test
from .units import format_duration

__all__ = ["gate_lines", "gate_table"]

HEADERS = ("test", "device", "baseline", "current", "ratio [95% CI]", "runs", "verdict", "why")


def _ratio(row: Row) -> str:
    est = row.estimate
    if est is None:
        return "-"
    return f"{est.ratio:.3f} [{est.low:.3f}, {est.high:.3f}]"


def _runs(row: Row) -> str:
    """Runs used on each side, with the total when some were left out as disturbed: ``3/1``, ``2 of 3/1``."""
    if row.estimate is None:
        return "-"

    def side(used: int, total: int) -> str:
        return f"{used} of {total}" if total > used else str(used)

    return f"{side(row.base_runs, row.base_total)}/{side(row.head_runs, row.head_total)}"


def _verdict(row: Row) -> str:
    marks = {Verdict.SLOWER: "SLOWER", Verdict.FASTER: "faster"}
    return marks.get(row.verdict, row.verdict.value)


def gate_table(result: GateResult, *, tablefmt: str = "simple") -> str:
    rows = [
        (
            short_test(row),
            row.device,
            "-" if row.baseline is None else format_duration(row.baseline),
            "-" if row.current is None else format_duration(row.current),
            _ratio(row),
            _runs(row),
            _verdict(row),
            row.reason,
        )
        for row in result.rows
    ]
    return tabulate(rows, headers=HEADERS, tablefmt=tablefmt, disable_numparse=True)


def gate_lines(result: GateResult) -> list[str]:
    """The lines under the table: what differs between the runs, the counts, and pass or fail."""
    lines = [f"differs (shown, not blocking): {note}" for note in result.notes]
    counts = ", ".join(f"{n} {verdict}" for verdict, n in result.counts().items())
    fail_on = ",".join(sorted(result.fail_on)) or "none"
    if result.failed:
        names = ", ".join(short_test(r) + f" [{r.device}]" for r in result.failing)
        lines.append(f"gpuperf gate: FAILED ({counts}; failing on {fail_on}): {names}")
    else:
        lines.append(f"gpuperf gate: passed ({counts or 'nothing compared'}; failing on {fail_on})")
    return lines
