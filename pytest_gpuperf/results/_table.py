"""The results table: one row per record, the session's "gpuperf results" and ``pytest-gpuperf runs show``.

``docs/glossary.md`` explains every column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tabulate import tabulate

from .._escape import printable
from ..measuring import format_duration, readings
from ._record import Record, Run, short_test
from ._starved import starved_flag

__all__ = [
    "HEADERS",
    "Ceiling",
    "ceilings",
    "flags",
    "peaks_of",
    "percent_of_peak",
    "reading_columns",
    "results_table",
    "table_notes",
]

#: The columns every results table has; the readings' (``measuring.readings``) come before "samples", where some
#: row has a cell for them.
HEADERS = ("test", "device", "median", "95% CI", "throughput", "samples", "flags")


def flags(record: Record) -> str:
    m = record.measurement
    # A test starved of cores comes first: the machine's load may explain everything after it.
    starved = starved_flag(record)
    out: list[str] = [starved] if starved else []
    if not m.converged:
        out.append("not converged")
    if m.over_time:
        out.append("over max_time")
    if not m.warmup.steady:
        out.append("warmup capped")
    if m.mode != "warm":
        out.append(m.mode)
    if m.no_device_work:
        out.append("no device work")
    elif m.host_bound:
        device = f", device {format_duration(m.device_per_call)}/call" if m.device_per_call is not None else ""
        out.append(f"host-bound (host {format_duration(m.host_per_call or 0)}/call{device})")
    if m.short_leads:
        out.append(f"short lead {m.short_leads}/{len(m.samples)}")
    drift = m.drift
    if drift is not None:
        out.append(f"drift {drift:+.1%}")
    for reading in readings():
        out += reading.flags(m)
    for check in record.checks:
        if check.outcome != "pass":
            out.append(f"{check.what} {check.outcome}")
    return ", ".join(out)


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


def results_table(
    records: Sequence[Record], *, tablefmt: str = "simple", peaks: Mapping[str, Ceiling] | None = None
) -> str:
    """One row per record; with ``peaks`` (device -> its ``ceilings``) a "% peak" column follows throughput,
    where some record's samples are single calls (``--gpuperf-per-call``) a "p99" column follows the CI, and the
    readings' columns (``reading_columns``) come before "samples"."""
    tail = any(r.measurement.single_calls for r in records)
    columns = reading_columns(records)
    rows = []
    for index, record in enumerate(records):
        m = record.measurement
        throughput = ", ".join(str(m.throughput(unit)) for unit in m.work)
        row = [
            short_test(record),
            record.device,
            format_duration(m.median),
            m.ci_text,
        ]
        if tail:
            row.append(m.percentile_text(99))
        row += [throughput or "-"]
        if peaks:
            row.append(percent_of_peak(record, peaks))
        row += [cells[index] for _, cells in columns]
        row += [f"{len(m.samples)}x{m.iterations}", flags(record)]
        rows.append([printable(cell) for cell in row])  # names from a file reach the terminal (``_escape.py``)
    headers = list(HEADERS)
    if tail:
        headers.insert(headers.index("95% CI") + 1, "p99")
    if peaks:
        headers.insert(headers.index("throughput") + 1, "% peak")
    at = headers.index("samples")
    headers[at:at] = [header for header, _ in columns]
    return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)


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
