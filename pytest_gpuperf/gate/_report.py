"""The one renderer of a GateResult, for every route: the table and the lines under it.

Columns: baseline and current seconds per call, the ratio current/baseline with its
95% interval, the runs used on each side (``3/1``; ``2 of 3/1`` when runs were left
out as disturbed; with the rounds behind them when runs had more than one), the
verdict, and why.
"""

from __future__ import annotations

from tabulate import tabulate

from ..measuring import format_duration
from ..results import short_test
from ._compare import GateResult, Row
from ._verdicts import Verdict

__all__ = ["HEADERS", "gate_lines", "gate_table"]

HEADERS = ("test", "device", "baseline", "current", "ratio [95% CI]", "runs", "verdict", "why")


def _ratio(row: Row) -> str:
    est = row.estimate
    if est is None:
        return "-"
    return f"{est.value:.3f} [{est.low:.3f}, {est.high:.3f}]"


def _runs(row: Row) -> str:
    """Runs used on each side: ``3/1``, ``2 of 3/1``; ``1/1 (40 rounds)`` when runs had several rounds."""
    if row.estimate is None:
        return "-"

    def side(used: int, total: int) -> str:
        return f"{used} of {total}" if total > used else str(used)

    runs = f"{side(row.base_runs, row.base_total)}/{side(row.head_runs, row.head_total)}"
    if row.base_rounds <= row.base_runs and row.head_rounds <= row.head_runs:
        return runs
    if row.base_rounds == row.head_rounds:
        return f"{runs} ({row.head_rounds} rounds)"
    return f"{runs} ({row.base_rounds}/{row.head_rounds} rounds)"


def _verdict(row: Row) -> str:
    marks = {Verdict.SLOWER: "SLOWER", Verdict.UNATTRIBUTED: "UNATTRIBUTED", Verdict.FASTER: "faster"}
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


def gate_lines(result: GateResult, label: str = "gpuperf gate") -> list[str]:
    """The lines under the table: what differs, what was skipped, the counts, and pass or fail."""
    lines = [f"differs (shown, not blocking): {note}" for note in result.notes]
    lines += [f"skipped {name}: {why}" for name, why in result.skipped.items()]
    counts = ", ".join(f"{n} {verdict}" for verdict, n in result.counts().items()) or "nothing compared"
    fail_on = ",".join(sorted(result.fail_on)) or "none"
    if result.failed:
        names = ", ".join(short_test(r) + f" [{r.device}]" for r in result.failing)
        lines.append(f"{label}: FAILED ({counts}; failing on {fail_on}): {names}")
    else:
        lines.append(f"{label}: passed ({counts}; failing on {fail_on})")
        unseen = [r for r in result.rows if r.verdict is Verdict.UNATTRIBUTED]
        if unseen:  # a slowdown the rule could not attribute never passes unsaid
            names = ", ".join(short_test(r) + f" [{r.device}]" for r in unseen)
            lines.append(
                f"{label}: WARNING: {len(unseen)} significant slowdown(s) measured while the machine was busy, "
                f"passed only because unattributed is not among the verdicts that fail: {names}"
            )
    return lines
