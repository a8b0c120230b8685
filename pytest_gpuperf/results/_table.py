"""The results table: one row per record, the session's "gpuperf results" and ``pytest-gpuperf runs show``.

``docs/glossary.md`` explains every column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tabulate import tabulate

from .._escape import printable
from ..measuring import Measurement, format_bytes, format_duration, format_rate
from ._record import Record, Run, short_test
from ._starved import starved_flag

__all__ = [
    "HEADERS",
    "Ceiling",
    "ceilings",
    "energy_lines",
    "flags",
    "peak_memory_cell",
    "peaks_of",
    "per_joule_cell",
    "percent_of_peak",
    "results_table",
    "table_notes",
]

HEADERS = ("test", "device", "median", "95% CI", "throughput", "peak mem", "samples", "flags")


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
    if m.clocks is not None and m.clocks.throttled:
        out.append(f"throttled {m.clocks.throttled}/{len(m.samples)}")
    for check in record.checks:
        if check.outcome != "pass":
            out.append(f"{check.what} {check.outcome}")
    return ", ".join(out)


def peak_memory_cell(m: Measurement) -> str:
    """The "peak mem" cell, each figure named (``docs/glossary.md``): the call's high-water mark (``51 MiB``);
    ``+24.3 MiB`` for a transient figure (growth above the call's start), the only one of a record where no
    high-water mark is known; ``+24.3 MiB, RSS 612 MiB`` on a CPU, whose only absolute figure is the process's
    (``unknown, RSS 612 MiB`` where the allocator's events could not tell the transient);
    ``unknown`` where the probe could not tell (the record's ``memory_method`` says why), ``-`` where it was off."""
    transient = None if m.memory_transient is None else f"+{format_bytes(m.memory_transient)}"
    if m.peak_memory is not None:
        if not m.process_peak:
            return format_bytes(m.peak_memory)
        # The transient part first: it is the step's; "unknown" where the allocator's events could not tell.
        known = transient or ("unknown" if m.transient_method.startswith("unknown") else "-")
        return f"{known}, RSS {format_bytes(m.peak_memory)}"
    if transient is not None:
        return transient
    return "unknown" if m.memory_method.startswith("unknown") else "-"


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


def per_joule_cell(record: Record) -> str:
    """Work per joule for each unit of work (samples/J beside samples/s), or joules per call without work; ``-``
    without an energy figure."""
    m = record.measurement
    energy = m.energy
    per_call = None if energy is None else energy.joules_per_call
    if energy is None or per_call is None:
        return "-"
    cells = [format_rate(amount / per_call, unit, per="J") for unit, amount in m.work.items()]
    return ", ".join(cells) or f"{per_call:.4g} J/call"


def energy_lines(records: Sequence[Record]) -> list[str]:
    """Under the table, once per device: why records that read no energy figure have none (no counter, a span
    too short for it)."""
    out: list[str] = []
    devices = dict.fromkeys(r.device for r in records)
    for device in devices:
        mine = [r.measurement.energy for r in records if r.device == device and r.measurement.energy is not None]
        notes = [e.note for e in mine if e.joules is None and e.note]
        if not notes:
            continue
        count = "" if len(notes) == len(mine) else f" for {len(notes)} of {len(mine)} records"
        more = "" if len(set(notes)) == 1 else f" (and {len(set(notes)) - 1} other reason(s): see the JSON)"
        out.append(f"energy: none{count} on {device}: {notes[0]}{more}")
    return out


def results_table(
    records: Sequence[Record], *, tablefmt: str = "simple", peaks: Mapping[str, Ceiling] | None = None
) -> str:
    """One row per record; with ``peaks`` (device -> its ``ceilings``) a "% peak" column follows throughput,
    where some record's samples are single calls (``--gpuperf-per-call``) a "p99" column follows the CI, and where
    some record has an energy figure a "per joule" column follows throughput (and % peak)."""
    tail = any(r.measurement.single_calls for r in records)
    energy = any(per_joule_cell(r) != "-" for r in records)
    rows = []
    for record in records:
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
        if energy:
            row.append(per_joule_cell(record))
        row += [
            peak_memory_cell(m),
            f"{len(m.samples)}x{m.iterations}",
            flags(record),
        ]
        rows.append([printable(cell) for cell in row])  # names from a file reach the terminal (``_escape.py``)
    headers = list(HEADERS)
    if tail:
        headers.insert(headers.index("95% CI") + 1, "p99")
    if peaks:
        headers.insert(headers.index("throughput") + 1, "% peak")
    if energy:
        headers.insert(headers.index("peak mem"), "per joule")
    return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)


def table_notes(records: Sequence[Record], peaks: Mapping[str, Ceiling]) -> list[str]:
    """The lines under a results table: why records have no energy figure (``energy_lines``), what each
    device's "% peak" is a fraction of (``Ceiling.line``), and why a record went over its max_time."""
    over = [f"{r.key}: over max_time: {r.measurement.over_time}" for r in records if r.measurement.over_time]
    lines = energy_lines(records) + [ceiling.line(device) for device, ceiling in peaks.items()] + over
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
