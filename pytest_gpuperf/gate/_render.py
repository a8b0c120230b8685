"""The one renderer of a GateResult, for every route: the table and the lines under it.

Columns: baseline and current seconds per call, the ratio current/baseline with its
95% interval, where some row has GPU clocks on both sides the ratio of time x SM clock
beside it (``time x clock``: the clocks' part taken out), the runs used on each side
(``3/1``; ``2 of 3/1`` when runs were left out as disturbed; with the rounds behind them
when runs had more than one), the verdict (``MORE WORK (timing inconclusive)`` for a row that fails by its work
alone), and why. Under the table, for each row whose counts or peak memory changed (issue 22: ``_work.py``,
``_memory.py``), what changed, whatever its verdict (``work_lines``).

Under the table, for every slower or unattributed row with work profiles on both sides, its "why"
(``why_lines``, from ``_why.py``): the ops and kernels whose time per call grew most, with their
calls per call and their share of the slowdown, and the time outside any op; how many lines moved within the
row's noise, unranked; for an inconclusive row whose counts went up, its count lines with both sides' times.

On GitHub Actions (``report_to_github``, every route calls it): the table and its lines are
appended, as Markdown, to the file ``$GITHUB_STEP_SUMMARY`` names, and, where
``GITHUB_ACTIONS=true``, every slower record and every failing verdict is printed as a
workflow annotation (``::error file=...,line=...,title=...::message``; ``::warning`` for a
slower record that does not fail), at the test function's ``def`` line when its file is found
(``ab``: at the line of the workloads module that names the workload).
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from tabulate import tabulate

from .._escape import print_command, printable
from ..measuring import SHOWN_CHANGES, Estimate, clipped, counted, format_duration
from ..results import short_test
from ._ab_load import module_file
from ._compare import GateResult, Row, count_verdicts
from ._rule import percent
from ._verdicts import CLEARED, MORE_WORK, WORK_NAMES, Verdict, describe_fail_on
from ._why import Attribution, WhyLine

__all__ = [
    "CLOCK_HEADER",
    "HEADERS",
    "clock_ratio_cell",
    "gate_lines",
    "gate_table",
    "github_annotations",
    "github_summary",
    "ratio_cell",
    "report_to_github",
    "runs_cell",
    "seen_cell",
    "verdict_cell",
    "why_cells",
    "why_heading",
    "why_lines",
    "why_markdown",
    "work_lines",
]

HEADERS = ("test", "device", "baseline", "current", "ratio [95% CI]", "can see", "runs", "verdict", "why")
#: The column after the ratio where some row has clocks on both sides.
CLOCK_HEADER = "time x clock [95% CI]"


def _interval(est: Estimate | None) -> str:
    return "-" if est is None else f"{est.value:.3f} [{est.low:.3f}, {est.high:.3f}]"


def ratio_cell(row: Row) -> str:
    return _interval(row.estimate)


def clock_ratio_cell(row: Row) -> str:
    """The ratio of time x median SM clock, the clocks' part of the time ratio taken out; ``-`` without clocks."""
    return _interval(row.clock_estimate)


def seen_cell(row: Row) -> str:
    """The smallest change the row's evidence can see, either way, at the gate's power: ``>= 3.1%``; ``-`` where
    it sees none (too few rounds) or was not compared."""
    seen = row.detectable
    return "-" if seen is None else f">= {percent(seen)}"


def runs_cell(row: Row) -> str:
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


def verdict_cell(row: Row, fail_on: frozenset[str]) -> str:
    """The row's verdict; ``MORE WORK (timing inconclusive)`` where its work fails it and its verdict does not."""
    if row.failing_by_work(fail_on):
        return f"MORE WORK (timing {row.verdict.value})"
    marks = {Verdict.SLOWER: "SLOWER", Verdict.UNATTRIBUTED: "UNATTRIBUTED", Verdict.FASTER: "faster"}
    return marks.get(row.verdict, row.verdict.value)


def _table(result: GateResult) -> tuple[list[str], list[tuple[str, ...]]]:
    """The verdict table's headers and each row's cells, ``printable``."""
    clocked = any(row.clock_estimate is not None for row in result.rows)
    rows = [
        _printable_cells(
            short_test(row),
            row.device,
            "-" if row.baseline is None else format_duration(row.baseline),
            "-" if row.current is None else format_duration(row.current),
            ratio_cell(row),
            *([clock_ratio_cell(row)] if clocked else []),
            seen_cell(row),
            runs_cell(row),
            verdict_cell(row, result.fail_on),
            row.reason,
        )
        for row in result.rows
    ]
    headers = list(HEADERS)
    if clocked:
        headers.insert(headers.index("ratio [95% CI]") + 1, CLOCK_HEADER)
    return headers, rows


def gate_table(result: GateResult, *, tablefmt: str = "simple") -> str:
    headers, rows = _table(result)
    return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)


def _printable_cells(*cells: str) -> tuple[str, ...]:
    """A table row's cells, each ``printable``: test names and reasons come from files (``_escape.py``)."""
    return tuple(printable(cell) for cell in cells)


#: Row.cause -> what an unattributed slowdown was measured while.
_WHILE = {"busy": "the machine was busy", "throttled": "the GPU ran at lower clocks"}


def gate_lines(result: GateResult, label: str = "gpuperf gate") -> list[str]:
    """The lines under the table: what differs, what was skipped, the counts, and pass or fail."""
    lines = [f"differs (shown, not blocking): {note}" for note in result.notes]
    lines += [f"skipped {name}: {why}" for name, why in result.skipped.items()]
    lines += work_lines(result) + _unseen_note(result, label)
    counts = ", ".join(f"{n} {verdict}" for verdict, n in result.counts().items())
    fail_on = describe_fail_on(result.fail_on)
    failing = result.failing
    if failing:
        names = ", ".join(short_test(r) + f" [{r.device}]" for r in failing)
        failing_ids = {id(row) for row in failing}  # by identity: comparing rows is comparing all they hold
        rest = ", ".join(
            f"{n} {verdict}"
            for verdict, n in count_verdicts(r for r in result.rows if id(r) not in failing_ids).items()
        )
        lines.append(
            f"{label}: FAILED: {_what_failed(result)}{'; ' + rest if rest else ''}; failing on {fail_on}: {names}"
        )
    elif not result.compared:  # a gate never passes on nothing
        failed = f"{label}: FAILED: " if result.failed else f"{label}: not failed (failing on {fail_on}), but "
        lines.append(failed + _nothing_compared(result))
    else:
        lines.append(f"{label}: passed ({counts}; failing on {fail_on})")
        unseen = [r for r in result.rows if r.verdict is Verdict.UNATTRIBUTED]
        if unseen:  # a slowdown the rule could not attribute never passes unsaid
            names = ", ".join(short_test(r) + f" [{r.device}]" for r in unseen)
            causes = [text for cause, text in _WHILE.items() if any(r.cause == cause for r in unseen)]
            lines.append(
                f"{label}: WARNING: {len(unseen)} significant slowdown(s) measured while "
                f"{' or '.join(causes) or 'the machine was busy'}, "
                f"passed only because unattributed is not among the verdicts that fail: {names}"
            )
    lines += _same_work_note(result, label) + _cleared_note(result, label)
    return [printable(line) for line in lines]


#: How many rows the warning of a tolerance below what rows can see names (the least sighted first).
_UNSEEN_NAMED = 5


def _unseen_note(result: GateResult, label: str) -> list[str]:
    """The warning that a fixed tolerance is below what some inconclusive rows can see (they could not be called
    unchanged): each named with what it can see; [] where there is none."""
    unseen = [
        (seen, row)
        for row in result.rows
        if row.verdict is Verdict.INCONCLUSIVE
        and not row.auto_tolerance
        and (seen := row.detectable) is not None
        and seen > row.tolerance
    ]
    if not unseen:
        return []
    unseen.sort(key=lambda pair: -pair[0])
    named = [f"{short_test(row)} [{row.device}] (can see >= {percent(seen)})" for seen, row in unseen[:_UNSEEN_NAMED]]
    more = f" and {len(unseen) - _UNSEEN_NAMED} more" if len(unseen) > _UNSEEN_NAMED else ""
    tolerances = sorted({percent(row.tolerance) for _, row in unseen})
    return [
        f"{label}: warning: {counted(len(unseen), 'row')} cannot see the {' or '.join(tolerances)} tolerance, so "
        f"none of them can be called unchanged: {', '.join(named)}{more}; gather more evidence, or give the "
        "tolerance auto (each row's own smallest detectable change)"
    ]


def _nothing_compared(result: GateResult) -> str:
    """``nothing compared (14 incomparable): ...``: what the rows were, and why none was compared (the first
    incomparable row's why names what differs and the override)."""
    counts = [f"{n} {verdict}" for verdict, n in result.counts().items()]
    counts += [f"{len(result.skipped)} skipped"] if result.skipped else []
    first = next((row for row in result.rows if row.verdict is Verdict.INCOMPARABLE), None)
    if first is not None:
        why = f"no row could be compared; the first: {short_test(first)} [{first.device}]: {first.reason}"
    else:
        why = "nothing was measured on both sides" if result.rows else "neither side has a record"
    return f"nothing compared ({', '.join(counts)}): {why}" if counts else f"nothing compared: {why}"


def _names(names: Iterable[str]) -> str:
    """Work names, in ``WORK_NAMES``' order, once each: ``ops,flops``."""
    seen = set(names)
    return ",".join(n for n in WORK_NAMES if n in seen)


def _what_failed(result: GateResult) -> str:
    """``1 slower, 1 more work (ops, flops)``: the failing rows by the verdict that fails them, else by the work,
    in the order they first appear."""
    counts: dict[str, int] = {}
    work: list[str] = []
    for row in result.failing:
        by_work = row.failing_by_work(result.fail_on)
        what = "more work" if by_work else row.verdict.value
        counts[what] = counts.get(what, 0) + 1
        work += by_work
    more = f" ({_names(work).replace(',', ', ')})"
    return ", ".join(f"{n} {what}{more if what == 'more work' else ''}" for what, n in counts.items())


def _cleared_note(result: GateResult, label: str) -> list[str]:
    """The rows whose work went up and that pass because their timing cleared them (``more-work``): said, never
    passed unsaid, with the names that would fail them."""
    if MORE_WORK not in result.fail_on:
        return []
    failing = {id(row) for row in result.failing}  # once: ``failing`` judges every row
    passing = [r for r in result.rows if r.verdict.value in CLEARED and id(r) not in failing]
    cleared = [(r, more) for r in passing if (more := r.work_failing(frozenset(WORK_NAMES)))]
    if not cleared:
        return []
    rows = ", ".join(f"{short_test(r)} [{r.device}] ({r.verdict.value}, more {_names(more)})" for r, more in cleared)
    names = _names(n for _, more in cleared for n in more)
    return [
        f"{label}: more work passed where the timing cleared it (measured unchanged or faster): {rows}; "
        f"to fail on it, name {names} in the fail-on list"
    ]


# ------------------------------------------------------------------ counts and memory (issue 22, items 2 and 5)


def work_lines(result: GateResult) -> list[str]:
    """Under the table, per row whose counts or peak memory changed (each reading's comparison, ``Row.changes``):
    what changed, a handful of lines at most."""
    lines = []
    for row in result.rows:
        name = f"{short_test(row)} [{row.device}]"
        for change in row.changes.values():
            summary = change.summary(row.work_fail_on(result.fail_on))
            if summary is None:
                continue
            lines.append(f"{name}: {summary}")
            shown, every = change.details(SHOWN_CHANGES), len(change.details())
            lines += [f"  {line}" for line in shown]
            if every > len(shown):
                lines.append(f"  ... and {every - len(shown)} more")
    return [printable(line) for line in lines]


def _same_work_note(result: GateResult, label: str) -> list[str]:
    failing = {id(row) for row in result.failing}  # once: ``failing`` judges every row
    same = [r for r in result.rows if r.verdict is Verdict.SAME_WORK and id(r) not in failing]
    if not same:
        return []
    names = ", ".join(short_test(r) + f" [{r.device}]" for r in same)
    return [
        f"{label}: {len(same)} significant slowdown(s) with the same work (every count identical): the machine "
        f"changed, not the code; passed because same-work is not among the verdicts that fail: {names}"
    ]


# ------------------------------------------------------------------ why it got slower (``_why.py``)

#: What the outside line holds, said once beside its name.
_OUTSIDE_NOTE = " (Python, the host, waits)"


def _signed(seconds: float) -> str:
    return ("+" if seconds >= 0 else "") + format_duration(seconds)


def _calls(line: WhyLine) -> str:
    """``1 -> 2 calls/call``, or ``2 calls/call`` where the count did not change (nothing for the outside line)."""
    if line.base_count is None or line.head_count is None:
        return ""
    if line.base_count == line.head_count:
        return f"{line.base_count:.4g} calls/call"
    return f"{line.base_count:.4g} -> {line.head_count:.4g} calls/call"


def why_heading(why: Attribution) -> str:
    """``+1.2 ms/call; the top 3 lines explain 91% of it`` (no line ranks where nothing grew: ``the top 0 lines``),
    where a share passes 100%, what the lines that got faster took back, and how many lines changed within the
    row's noise (not ranked). A why of count lines only (``counts_only``) says that the times cannot judge it."""
    if why.counts_only:
        low, high = why.interval_seconds or (0.0, 0.0)
        noise = "" if why.interval_seconds is None else f" (its interval: {_signed(low)} to {_signed(high)}/call)"
        return (
            f"{_signed(why.slowdown_seconds)}/call, which the times cannot judge{noise}; "
            "the lines whose count changed, each with its time per call on both sides"
        )
    top = "the top line explains" if why.ranked == 1 else f"the top {why.ranked} lines explain"
    heading = f"{_signed(why.slowdown_seconds)}/call; {top} {why.explained:.0%} of it"
    if why.explained > 1 or any(line.share > 1 for line in why.lines):
        # more than all of it: only as much as other lines took back (every line's shares add up to 100%)
        heading += f"; lines that got faster took back {-why.faster:.0%}"
    if why.within_noise:
        lines = counted(why.within_noise, "other line" if why.ranked else "line")
        within = f"{format_duration(why.noise_seconds or 0.0)}/call or less, within the row's own interval"
        heading += f"; the op times cannot separate {lines} from noise (each moved by {within})"
    return heading


def why_cells(line: WhyLine, *, share: bool = True) -> tuple[str, str, str, str]:
    """A line's change per call, share of the slowdown ("" where ``share`` is False: a why of count lines only),
    what it is (``op aten::mm``) and its calls per call (every renderer's cells: the terminal's, the job
    summary's, the HTML report's)."""
    if line.kind == "outside":
        what = line.name + _OUTSIDE_NOTE
    elif line.kind == "python":
        what = f"Python call {line.name}"
    else:
        what = f"{line.kind} {line.name}"
    return f"{_signed(line.delta_seconds)}/call", f"{line.share:.0%}" if share else "", what, _calls(line)


def _sides(line: WhyLine) -> str:
    """``0 ns -> 2.5 ms/call``: the line's time per call on each side."""
    return f"{format_duration(line.base_seconds)} -> {format_duration(line.head_seconds)}/call"


def _why_rows(why: Attribution) -> list[tuple[str, str, str, str]]:
    """Each line's cells, the calls per call followed by both sides' times in a why of count lines only."""
    out = []
    for line in why.lines:
        delta, share, what, calls = why_cells(line, share=not why.counts_only)
        if why.counts_only:
            calls = f"{calls}; {_sides(line)}" if calls else _sides(line)
        out.append((delta, share, what, calls))
    return out


def why_lines(result: GateResult) -> list[str]:
    """The "why" under the table, for every row that has one: a line naming the row and its slowdown, then one
    per op, kernel, and the time outside them, in the order they rank (``attribute``)."""
    out = []
    for row in result.rows:
        if row.why is None:
            continue
        out.append(f"why {short_test(row)} [{row.device}] {verdict_cell(row, result.fail_on)}: {why_heading(row.why)}")
        parts = _why_rows(row.why)
        width = max(len(delta) for delta, *_ in parts)
        for delta, share, what, calls in parts:
            shares = f" {share:>5}" if share else ""
            out.append(f"  {delta:>{width}}{shares}  {what}" + (f", {calls}" if calls else ""))
    return [printable(line) for line in out]


def _markdown(text: str) -> str:
    """User text (an op's name, a test id) as inert Markdown: HTML escaped, Markdown's punctuation backslashed."""
    text = html.escape(text, quote=True)
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|~<>])", r"\\\1", text)


def why_markdown(result: GateResult) -> list[str]:
    """``why_lines`` as a Markdown list for GitHub's job summary (every name escaped); [] when no row has one."""
    out = []
    for row in result.rows:
        if row.why is None:
            continue
        name = _markdown(f"{short_test(row)} [{row.device}]")
        out.append(f"- **why** {name} {verdict_cell(row, result.fail_on)}: {_markdown(why_heading(row.why))}")
        for delta, share, what, calls in _why_rows(row.why):
            shares = f" ({share})" if share else ""
            out.append(f"  - {_markdown(delta)}{shares} {_markdown(what)}" + (f", {calls}" if calls else ""))
    return out + ([""] if out else [])


# ------------------------------------------------------------------ GitHub Actions


#: What a step's summary may hold, below the 1 MiB GitHub keeps of a step's (every append of the step together):
#: over it, the runner drops the whole summary.
SUMMARY_LIMIT = 1_000_000
#: The longest cell of the summary's table and the longest line under it, in characters: a longer one is clipped
#: (the step's log holds it whole).
SUMMARY_CELL = 500
SUMMARY_LINE = 2000


def _pipe_row(cells: Iterable[str]) -> str:
    """A row of GitHub's pipe table, unpadded (a cell as wide as its text): each cell clipped, its pipes escaped."""
    return "| " + " | ".join(clipped(cell, SUMMARY_CELL).replace("|", "\\|") for cell in cells) + " |"


def _size(lines: Iterable[str]) -> int:
    """The bytes ``lines`` take in the summary file, a newline after each."""
    return sum(len(line.encode()) + 1 for line in lines)


def _prefix(lines: list[str], room: int) -> list[str]:
    """The first of ``lines`` that fit in ``room`` bytes."""
    out: list[str] = []
    for line in lines:
        room -= _size([line])
        if room < 0:
            break
        out.append(line)
    return out


def github_summary(
    result: GateResult, *, title: str, context: str = "", label: str = "gpuperf gate", limit: int = SUMMARY_LIMIT
) -> str:
    """The verdict table and its lines as Markdown, for ``$GITHUB_STEP_SUMMARY``, in at most ``limit`` bytes: a pipe
    table without padding, cells and lines clipped; where that is still over, rows (the failing ones kept first)
    and the lines under the table are left out, the verdict lines kept, and a line says how many and where the
    whole table is."""
    headers, cells = _table(result)
    head = [f"### {title}", ""] + ([context, ""] if context else [])
    head += [_pipe_row(headers), _pipe_row("---" for _ in headers)]
    rows = [_pipe_row(row) for row in cells]
    work = set(work_lines(result))  # user text (op and kernel names): escaped, as the why's lines are
    lines = [
        f"- {_markdown(clipped(line, SUMMARY_LINE)) if line in work else clipped(line, SUMMARY_LINE)}"
        for line in gate_lines(result, label)
    ]
    verdict = [line for line in lines if line.startswith(f"- {label}: ")]  # the last lines: pass or fail
    under = why_markdown(result) + [line for line in lines if line not in verdict]
    whole = [*head, *rows, "", *under, *verdict, ""]
    if _size(whole) <= limit:
        return "\n".join(whole) + "\n"

    def note(rows_left: int, lines_left: int) -> str:
        lines_too = f" and {counted(lines_left, 'line')} under it" if lines_left else ""
        return (
            f"- {rows_left} of {counted(len(rows), 'row')}{lines_too} left out: GitHub keeps at most 1 MiB of a "
            "step's summary; the whole table is in this step's log"
        )

    room = limit - _size([*head, "", note(len(rows), len(under)), *verdict, ""])
    failing = {id(row) for row in result.failing}
    first = sorted(range(len(rows)), key=lambda i: id(result.rows[i]) not in failing)  # the failing rows first
    chosen = set(first[: len(_prefix([rows[i] for i in first], room))])
    kept = [row for i, row in enumerate(rows) if i in chosen]
    shown = _prefix(under, room - _size(kept))
    ending = [note(len(rows) - len(kept), len(under) - len(shown)), *verdict]
    return "\n".join([*head, *kept, "", *shown, *ending, ""]) + "\n"


def _escape(text: str, *, prop: bool = False) -> str:
    """A workflow command's data (``prop``: a property value), escaped as GitHub's runner expects."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def locate(test: str, root: Path) -> tuple[str, int | None]:
    """The file of a node id, and the line of its test function's ``def`` when that file is under ``root``."""
    path, *names = test.partition("[")[0].split("::")
    try:
        lines = (root / path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return path, None
    start = 0
    for name in names:  # a class first, then the function inside it
        pattern = re.compile(rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b")
        found = next((i for i in range(start, len(lines)) if pattern.match(lines[i])), None)
        if found is None:
            return path, None
        start = found
    return path, start + 1 if names else None


def locate_workload(name: str, module: Path, root: Path) -> tuple[str, int | None]:
    """The file of the workloads module (``ab``) that names workload ``name``, and the line, when found: the
    module's own file; for a package its ``__init__.py``, then the modules inside it."""
    found = module_file(root, module)
    if found is None:
        return str(module), None
    files = [found]
    if found.name == "__init__.py":
        files += sorted(path for path in found.parent.rglob("*.py") if path != found)
    quoted = (f'"{name}"', f"'{name}'")
    for file in files:
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        line = next((i + 1 for i, text in enumerate(lines) if any(q in text for q in quoted)), None)
        if line is not None:
            return str(file.relative_to(root)), line
    return str(found.relative_to(root)), None


def github_annotations(
    result: GateResult, root: Path, label: str = "gpuperf gate", workloads: Path | None = None
) -> list[str]:
    """One annotation per failing row (``::error``) and per slower, unattributed or same-work row, or row whose
    work went up, that does not fail (``::warning``);
    ``workloads``: the rows are ``ab``'s workloads of that module, not tests."""
    out = []
    failing_rows = result.failing
    for row in result.rows:
        failing = row in failing_rows
        more_work = bool(row.work_failing(frozenset(WORK_NAMES)))
        slowdowns = (Verdict.SLOWER, Verdict.UNATTRIBUTED, Verdict.SAME_WORK)
        if not failing and not more_work and row.verdict not in slowdowns:
            continue
        path, line = locate(row.test, root) if workloads is None else locate_workload(row.test, workloads, root)
        # Each value from a file is made printable first (no control codes), then escaped as GitHub's runner
        # expects, so that it stays inside its annotation.
        where = f"file={_escape(printable(path), prop=True)}" + (f",line={line}" if line is not None else "")
        badge = verdict_cell(row, result.fail_on)
        title = _escape(printable(f"{label}: {short_test(row)} [{row.device}] {badge}"), prop=True)
        ratio = f" (ratio {ratio_cell(row)})" if row.estimate is not None else ""
        ratio += f" (time x clock {clock_ratio_cell(row)})" if row.clock_estimate is not None else ""
        about = printable(f"{row.key} on {row.device}: {row.verdict.value}{ratio}: {row.reason}")
        message = _escape(about + _work_note(row))
        out.append(f"::{'error' if failing else 'warning'} {where},title={title}::{message}")
    return out


def _work_note(row: Row) -> str:
    """The counts and memory that changed, for an annotation's message."""
    changed = [change for change in row.changes.values() if change.summary(frozenset()) is not None]
    parts = [change.summary(frozenset()) or "" for change in changed]
    parts += ["; ".join(shown) for change in changed if (shown := change.details(SHOWN_CHANGES))]
    return "".join(f"\n{printable(part)}" for part in parts)


def append_summary(markdown: str, label: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """Append ``markdown`` to the file ``$GITHUB_STEP_SUMMARY`` names, when it is set; returns a warning (the
    file could not be written) or []."""
    summary = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY")
    if not summary:
        return []
    try:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(markdown)
    except OSError as exc:
        return [f"{label}: could not append to GITHUB_STEP_SUMMARY={summary}: {exc.strerror or exc}"]
    return []


def report_to_github(
    result: GateResult,
    *,
    title: str,
    context: str = "",
    label: str = "gpuperf gate",
    root: Path | None = None,
    workloads: Path | None = None,
    environ: Mapping[str, str] | None = None,
    out: Callable[[str], None] = print_command,
) -> list[str]:
    """Append the summary to ``$GITHUB_STEP_SUMMARY`` when it is set, in what the step's earlier appends left of
    ``SUMMARY_LIMIT``, and print the annotations (with ``out``) when ``GITHUB_ACTIONS=true``; returns warnings (a
    summary file that could not be written, or too full for the verdict lines), else []."""
    env = os.environ if environ is None else environ
    warnings: list[str] = []
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            room = SUMMARY_LIMIT - os.stat(summary).st_size  # the step's earlier appends count
        except OSError:
            room = SUMMARY_LIMIT  # none yet (or unwritable: append_summary says so)
        markdown = github_summary(result, title=title, context=context, label=label, limit=room)
        if len(markdown.encode()) <= room:
            warnings = append_summary(markdown, label, env)
        else:
            warnings = [
                f"{label}: GITHUB_STEP_SUMMARY={summary} holds {SUMMARY_LIMIT - room} bytes already, too near "
                "GitHub's 1 MiB for the verdict table: it is not appended (this step's log has it)"
            ]
    if env.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(result, root or Path.cwd(), label, workloads):
            out(line)
    return warnings
