"""The results table: one row per record, the session's "gpuperf results" and ``pytest-gpuperf runs show``.

``docs/glossary.md`` explains every column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tabulate import tabulate

from ..measuring import format_bytes, format_duration
from ._record import Record, Run, short_test

__all__ = ["HEADERS", "flags", "peak_memory_cell", "peaks_of", "percent_of_peak", "results_table"]

HEADERS = ("test", "device", "median", "95% CI", "throughput", "peak mem", "samples", "flags")


def flags(record: Record) -> str:
    m = record.measurement
    out: list[str] = []
    if not m.converged:
        out.append("not converged")
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


def peak_memory_cell(peak: int | None, method: str) -> str:
    """The bytes; ``unknown`` where the probe could not tell (the method says why), ``-`` where it was off."""
    if peak is not None:
        return format_bytes(peak)
    return "unknown" if method.startswith("unknown") else "-"


def percent_of_peak(record: Record, peaks: Mapping[str, float]) -> str:
    """The record's FLOP/s as a percentage of its device's reference peak, or '-' without FLOP work or a peak."""
    m = record.measurement
    peak = peaks.get(record.device)
    if peak is None or peak <= 0 or "FLOP" not in m.work:
        return "-"
    return f"{m.throughput('FLOP').value / peak:.0%}"


def results_table(
    records: Sequence[Record], *, tablefmt: str = "simple", peaks: Mapping[str, float] | None = None
) -> str:
    """One row per record; with ``peaks`` (device -> reference FLOP/s) a "% peak" column follows throughput,
    and where some record's samples are single calls (``--gpuperf-per-call``) a "p99" column follows the CI."""
    tail = any(r.measurement.single_calls for r in records)
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
        row += [
            peak_memory_cell(m.peak_memory, m.memory_method),
            f"{len(m.samples)}x{m.iterations}",
            flags(record),
        ]
        rows.append(row)
    headers = list(HEADERS)
    if tail:
        headers.insert(headers.index("95% CI") + 1, "p99")
    if peaks:
        headers.insert(headers.index("throughput") + 1, "% peak")
    return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)


def peaks_of(run: Run) -> dict[str, float]:
    """The reference peaks (device -> FLOP/s) a saved run recorded, for the "% peak" column."""
    out: dict[str, float] = {}
    for device, description in run.devices.items():
        peak = description.get("reference_peak")
        value = peak.get("FLOP/s") if isinstance(peak, Mapping) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            out[device] = float(value)
    return out
