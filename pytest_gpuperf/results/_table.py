"""The results table: one row per record, the session's "gpuperf results" and ``pytest-gpuperf runs show``.

``docs/glossary.md`` explains every column. The table fits the terminal's width (``table_lines``): its flags are
short codes, spelt out in full under the table, and a table still too wide stacks its cells' parts and wraps its
widest columns.
"""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import Final

import tabulate as tabulate_module
from tabulate import tabulate

from .._escape import printable
from ..measuring import format_duration, readings
from ._record import Record, Run, short_test
from ._starved import starved_flag

__all__ = [
    "HEADERS",
    "Ceiling",
    "Flag",
    "ceilings",
    "flag_legend",
    "flags",
    "peaks_of",
    "percent_of_peak",
    "reading_columns",
    "results_table",
    "row_flags",
    "table_lines",
    "table_notes",
    "terminal_width",
    "wrap_line",
]

#: The columns every results table has; the readings' (``measuring.readings``) come before "samples", where some
#: row has a cell for them.
HEADERS = ("test", "device", "median", "95% CI", "throughput", "samples", "flags")


@dataclass(frozen=True)
class Flag:
    """One flag of a record: its ``text`` in full (the HTML report's, ``flags``), the table's short ``code`` for
    it, what else explains it (``why``, spelt out under the table), and whether the table's row shows it at all
    (``in_row``: "not converged" where the row's own interval already says so does not)."""

    text: str
    code: str
    why: str = ""
    in_row: bool = True

    @property
    def spelt_out(self) -> str:
        """What the code stands for under the table; '' where the code says all of it."""
        full = f"{self.text}: {self.why}" if self.why else self.text
        return "" if full == self.code else full


def _code(text: str) -> str:
    """The short form of a flag's text: its words before any figure or parenthesis (``throttled 3/21``:
    ``throttled``; ``starved (0.25 of 1 core)``: ``starved``)."""
    words = text.split(" (", 1)[0].split(" ")
    kept = list(takewhile(lambda word: not (word[:1].isdigit() or word[:1] in "+-"), words))
    return " ".join(kept) or text


def row_flags(record: Record) -> list[Flag]:
    """The record's flags, in order (``flags`` joins their texts)."""
    m = record.measurement
    # A test starved of cores comes first: the machine's load may explain everything after it.
    starved = starved_flag(record)
    out = [Flag(starved, _code(starved))] if starved else []
    if not m.converged:
        # Its interval is in the row: a wide one, or none from too few samples, says all "not converged" says.
        said = m.too_few_samples or m.relative_ci > m.target
        out.append(Flag("not converged", "not conv.", m.stop_reason, in_row=not said))
    texts = []
    if m.over_time:
        texts.append("over max_time")
    if not m.warmup.steady:
        texts.append("warmup capped")
    if m.mode != "warm":
        texts.append(m.mode)
    if m.no_device_work:
        texts.append("no device work")
    elif m.host_bound:
        device = f", device {format_duration(m.device_per_call)}/call" if m.device_per_call is not None else ""
        texts.append(f"host-bound (host {format_duration(m.host_per_call or 0)}/call{device})")
    if m.short_leads:
        texts.append(f"short lead {m.short_leads}/{len(m.samples)}")
    drift = m.drift
    if drift is not None:
        texts.append(f"drift {drift:+.1%}")
    for reading in readings():
        texts += reading.flags(m)
    out += [Flag(text, _code(text)) for text in texts]
    for check in record.checks:
        if check.outcome != "pass":
            text = f"{check.what} {check.outcome}"  # "throughput fail"; a long "what" is spelt out under the table
            out.append(Flag(text, text if " " not in check.what else f"check {check.outcome}"))
    return out


def flags(record: Record) -> str:
    """The record's flags in full, as the HTML report shows them (``row_flags``)."""
    return ", ".join(flag.text for flag in row_flags(record))


@dataclass(frozen=True)
class Ceiling:
    """The 100% of a device's "% peak": its datasheet peak where one is known, else the best FLOP/s measured; also
    a reference peak offered in a session (``gpuperf.offer_reference_peak``)."""

    flops_per_second: float
    how: str  # what it is, e.g. "matmul bfloat16 n=1024, 190 GFLOP/s median"
    #: "measured" (in this session), or "datasheet" (the vendor's figure, from the suites' expectations.json)
    source: str = "measured"

    def line(self, device: str) -> str:
        """The line under a table with a "% peak" column, saying what the device's 100% is."""
        if self.source == "datasheet":
            return (
                f"% peak: of {device}'s datasheet peak, {self.how}; a row marked * ran above it "
                "(a datasheet peak is at boost clock: a faster row means a wrong datasheet entry or a FLOP count "
                "that is too high)"
            )
        return f"% peak: of {device}'s reference peak, the best FLOP/s measured in this run: {self.how}"


def ceilings(records: Sequence[Record], offered: Mapping[str, Ceiling]) -> dict[str, Ceiling]:
    """Each device's ceiling for "% peak": a datasheet peak offered for it, else the best of the reference peak
    offered and every record's FLOP/s on it, so that no row of a measured ceiling exceeds 100%.

    Only devices with an offered ceiling get one (the matmul suite offers its reference peak): a session of
    unrelated tests shows no "% peak" column."""
    out: dict[str, Ceiling] = {}
    for device, ceiling in offered.items():
        if ceiling.source != "datasheet":
            for record in records:
                m = record.measurement
                if record.device == device and "FLOP" in m.work:
                    rate = m.throughput("FLOP")
                    if rate.value > ceiling.flops_per_second:
                        ceiling = Ceiling(rate.value, f"{short_test(record)}, {rate} median")
        out[device] = ceiling
    return out


def percent_of_peak(record: Record, peaks: Mapping[str, Ceiling]) -> str:
    """The record's FLOP/s as a percentage of its device's ceiling (``ceilings``), or '-' without FLOP work or a
    ceiling; marked ``*`` above a datasheet peak (the line under the table says why)."""
    m = record.measurement
    peak = peaks.get(record.device)
    if peak is None or peak.flops_per_second <= 0 or "FLOP" not in m.work:
        return "-"
    fraction = m.throughput("FLOP").value / peak.flops_per_second
    # A measured ceiling is the best of the rows, so only a datasheet figure can be exceeded.
    return f"{fraction:.0%}*" if fraction > 1 else f"{fraction:.0%}"


def reading_columns(records: Sequence[Record]) -> list[tuple[str, list[str]]]:
    """The readings' columns (``measuring.readings``, in order) that some record has a cell in: the header, and each
    record's cell (``-`` where it has none)."""
    out = []
    for reading in readings():
        if not reading.header:
            continue
        cells = [reading.cell(r.measurement) for r in records]
        if any(cell is not None for cell in cells):
            out.append((reading.header, [cell or "-" for cell in cells]))
    return out


def _label(record: Record, devices: int) -> str:
    """A row's name under the table: its test, and its device where the table has several."""
    return short_test(record) if devices < 2 else f"{short_test(record)} on {record.device}"


def results_table(
    records: Sequence[Record],
    *,
    tablefmt: str = "simple",
    peaks: Mapping[str, Ceiling] | None = None,
    width: int | None = None,
) -> str:
    """One row per record; with ``peaks`` (device -> its ``ceilings``) a "% peak" column follows throughput,
    where some record's samples are single calls by request (``--gpuperf-per-call``: ``Measurement.latency``) a
    "p99" column follows the CI, and the readings' columns (``reading_columns``) come before "samples". The flags
    are short codes (``Flag.code``; ``flag_legend`` spells them out).

    With a ``width``, a table wider than it drops a device column that is the same on every row (``flag_legend``
    then names the device), puts each part of a cell (each throughput, each flag) on a line of its own, then wraps
    its widest columns of words (a test name at its ``::``, ``[`` and ``-``) until it fits."""
    columns = _columns(records, peaks)
    if width is None:
        return _render(columns, tablefmt, stacked=False)
    table, _ = _fit(columns, tablefmt, width, same_device=len({r.device for r in records}) == 1)
    return table


def _columns(records: Sequence[Record], peaks: Mapping[str, Ceiling] | None) -> list[tuple[str, list[list[str]]]]:
    """The results table's columns (``results_table``): each header, and each row's parts of its cell."""
    tail = any(r.measurement.latency for r in records)
    columns: list[tuple[str, list[list[str]]]] = [
        ("test", [[short_test(r)] for r in records]),
        ("device", [[r.device] for r in records]),
        ("median", [[format_duration(r.measurement.median)] for r in records]),
        ("95% CI", [[r.measurement.ci_text] for r in records]),
    ]
    if tail:
        columns.append(("p99", [[_p99(r)] for r in records]))
    columns.append(("throughput", [[str(r.measurement.throughput(u)) for u in r.measurement.work] for r in records]))
    if peaks:
        columns.append(("% peak", [[percent_of_peak(r, peaks)] for r in records]))
    columns += [(header, [cell.split(", ") for cell in cells]) for header, cells in reading_columns(records)]
    columns.append(("samples", [[f"{len(r.measurement.samples)}x{r.measurement.iterations}"] for r in records]))
    columns.append(("flags", [[f.code for f in row_flags(r) if f.in_row] for r in records]))
    return columns


def _p99(record: Record) -> str:
    m = record.measurement
    return m.percentile_text(99) if m.latency else "-"


#: The columns whose cells are words that may wrap onto several lines; the figures' stay whole.
_WRAPPED = ("test", "throughput", "peak mem", "flags")
#: The narrowest a test's name wraps to; the other columns' narrowest is their longest word.
NARROWEST_NAME: Final = 10


def _render(columns: Sequence[tuple[str, Sequence[Sequence[str]]]], tablefmt: str, *, stacked: bool) -> str:
    """The table of ``columns`` (header, each row's parts of its cell): parts joined by commas, or ``stacked``
    one a line."""
    headers = [header for header, _ in columns]
    rows = zip(*(cells for _, cells in columns), strict=True)
    # Names from a file reach the terminal (``_escape.py``).
    joint = "\n" if stacked else ", "
    cells = [[joint.join(printable(part) for part in parts) or "-" for parts in row] for row in rows]
    if not stacked:
        return tabulate(cells, headers=headers, tablefmt=tablefmt, disable_numparse=True)
    padding = tabulate_module.MIN_PADDING
    tabulate_module.MIN_PADDING = 0  # a column as wide as its header, not 2 more: a fitted table has no room
    try:
        return tabulate(cells, headers=headers, tablefmt=tablefmt, disable_numparse=True)
    finally:
        tabulate_module.MIN_PADDING = padding


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _fit(
    columns: list[tuple[str, list[list[str]]]], tablefmt: str, width: int, *, same_device: bool
) -> tuple[str, bool]:
    """The table within ``width`` where it can be (``results_table``), and whether it dropped the device column."""
    table = _render(columns, tablefmt, stacked=False)
    if _widest(table) <= width:
        return table, False
    # Stacked: a part a line, the flags' codes as many a line as the longest of them leaves room for.
    longest = max((len(code) for h, cells in columns if h == "flags" for parts in cells for code in parts), default=0)
    table = _narrowed(columns, tablefmt, width, {"flags": longest + 1})
    if _widest(table) <= width or not same_device:
        return table, False
    return _narrowed([c for c in columns if c[0] != "device"], tablefmt, width, {"flags": longest + 1}), True


def _narrowed(columns: list[tuple[str, list[list[str]]]], tablefmt: str, width: int, limits: dict[str, int]) -> str:
    """The stacked table, its columns of words wrapped narrower a character at a time until it fits: each time
    the one whose wrapping adds the fewest lines (the widest of those), a test's name to ``NARROWEST_NAME``, the
    others' words kept whole."""
    floors = {
        h: NARROWEST_NAME
        if h == "test"
        else max((len(w) for parts in cells for part in parts for w in part.split()), default=1)
        for h, cells in columns
        if h in _WRAPPED
    }
    cells_of = dict(columns)
    shaped = {h: _shape(cells, limits.get(h), h) for h, cells in columns}
    wide = {h: _column(cells) for h, cells in shaped.items()}
    # Each column's next narrower shape, kept until it is taken: one wrapping per column and width.
    candidates: dict[str, list[list[str]]] = {}
    # The width of the stacked table (``_render``: no padding, two spaces between columns).
    while sum(max(len(h), w) for h, w in wide.items()) + 2 * (len(wide) - 1) > width:
        for h in [h for h in floors if h not in candidates]:
            shape = _shape(cells_of[h], wide[h] - 1, h) if wide[h] > floors[h] else None
            if shape is not None and _column(shape) < wide[h]:
                candidates[h] = shape
            else:  # at its narrowest: a word as wide as the column, comma and all, stays whole
                del floors[h]
        if not candidates:
            break
        header = min(candidates, key=lambda h: (_lines({**shaped, h: candidates[h]}), -wide[h]))
        shaped[header] = candidates.pop(header)
        wide[header] = _column(shaped[header])
    return _render(list(shaped.items()), tablefmt, stacked=True)


def _column(cells: Sequence[Sequence[str]]) -> int:
    """The width of a column's widest line (before ``printable``, which widens only a name with control codes)."""
    return max((len(line) for parts in cells for line in parts), default=1)


def _lines(shaped: Mapping[str, list[list[str]]]) -> int:
    """The stacked table's lines: its rows' tallest cells."""
    return sum(max(len(parts) for parts in row) for row in zip(*shaped.values(), strict=True))


def _shape(cells: Sequence[Sequence[str]], limit: int | None, header: str) -> list[list[str]]:
    """Each cell's parts wrapped to ``limit`` (``_wrap``; the flags' codes by ``_codes``), where the column has one."""
    if limit is None:
        return [list(parts) for parts in cells]
    if header == "flags":
        return [_codes(parts, limit) for parts in cells]
    return [[line for part in parts for line in _wrap(part, limit, header == "test")] for parts in cells]


def _codes(codes: Sequence[str], limit: int) -> list[str]:
    """Flag codes, comma-separated, as many a line as fit in ``limit``; a code broken only where it alone is
    longer."""
    lines: list[str] = []
    for at, code in enumerate(codes):
        piece = code if at == len(codes) - 1 else code + ","
        if lines and len(lines[-1]) + 1 + len(piece) <= limit:
            lines[-1] += " " + piece
        else:
            lines += _wrap(piece, limit, False)
    return lines


def _wrap(text: str, width: int, name: bool) -> list[str]:
    """``text`` in lines of at most ``width``: a test name broken after its ``::``, ``[``, ``-`` or ``_`` where it
    can be, other text at its spaces."""
    if len(text) <= width:
        return [text]
    if not name:
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [text]
    lines = []
    while len(text) > width:
        # After the last mark that leaves the line within the width; inside a word where none does.
        cut = max(
            (at + len(mark) for mark in ("::", "[", "-", "_") if (at := text.rfind(mark, 1, width)) > 0),
            default=width,
        )
        while cut > 1 and text[cut] == ":":  # no line of the table starts "::" (``printable``)
            cut -= 1
        lines.append(text[:cut])
        text = text[cut:]
    return [*lines, text] if text else lines


def flag_legend(records: Sequence[Record]) -> list[str]:
    """The lines under a results table that spell out its rows' flags (``Flag.spelt_out``), one line a row."""
    devices = len({r.device for r in records})
    lines = []
    for record in records:
        spelt = [f.spelt_out for f in row_flags(record) if f.in_row and f.spelt_out]
        if spelt:
            lines.append(f"{_label(record, devices)}: {'; '.join(spelt)}")
    return [printable(line) for line in (["flags in full:", *("  " + line for line in lines)] if lines else [])]


def table_lines(
    records: Sequence[Record], peaks: Mapping[str, Ceiling], *, width: int | None = None, tablefmt: str = "simple"
) -> list[str]:
    """The terminal's results: the table (``results_table``), the flags spelt out (``flag_legend``) and the notes
    (``table_notes``); with a ``width`` the table fits it (a "simple" table) and the lines under it wrap to it."""
    devices = {r.device for r in records}
    if width is None or tablefmt != "simple":
        lines = results_table(records, tablefmt=tablefmt, peaks=peaks).splitlines()
    else:
        table, dropped = _fit(_columns(records, peaks), tablefmt, width, same_device=len(devices) == 1)
        lines = table.splitlines() + ([f"device: {printable(devices.pop())}, every row"] if dropped else [])
    under = [*flag_legend(records), *table_notes(records, peaks)]
    if width is None:
        return lines + under
    return lines + [wrapped for line in under for wrapped in wrap_line(line, width)]


def terminal_width(tty: bool) -> int | None:
    """The width to fit the results to: ``COLUMNS`` where set, else the terminal's where the output is one
    (``tty``); None for output to a file or a pipe, which keeps its rows whole."""
    if "COLUMNS" not in os.environ and not tty:
        return None
    return shutil.get_terminal_size().columns


def wrap_line(line: str, width: int | None) -> list[str]:
    """A line under a table in lines of at most ``width`` (later ones indented), words kept whole where they fit."""
    if width is None or len(line) <= width:
        return [line]
    indent = "  " if line.startswith("  ") else ""
    return textwrap.wrap(
        line, width, subsequent_indent=indent + "    ", break_on_hyphens=False, break_long_words=True
    ) or [line]


def table_notes(records: Sequence[Record], peaks: Mapping[str, Ceiling]) -> list[str]:
    """The lines under a results table: the readings' (``Reading.notes``), what
    each device's "% peak" is a fraction of (``Ceiling.line``), and why a record went over its max_time."""
    measurements = [r.measurement for r in records]
    lines = [line for reading in readings() for line in reading.notes(measurements)]
    lines += [ceiling.line(device) for device, ceiling in peaks.items()]
    lines += [f"{r.key}: over max_time: {r.measurement.over_time}" for r in records if r.measurement.over_time]
    return [printable(line) for line in lines]


def peaks_of(run: Run) -> dict[str, Ceiling]:
    """The ceilings of a saved run's "% peak" (``ceilings``), from the reference peaks its devices recorded."""
    offered: dict[str, Ceiling] = {}
    for device, description in run.devices.items():
        peak = description.get("reference_peak")
        if not isinstance(peak, Mapping):
            continue
        value = peak.get("FLOP/s")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            source = "datasheet" if peak.get("source") == "datasheet" else "measured"
            offered[device] = Ceiling(float(value), str(peak.get("how", "")), source)
    return ceilings(run.records, offered)
