"""What every view of a record says about it besides its numbers: its flags, its % of peak, its peak memory.

The session's results table (``_pytest/_report.py``) and the HTML report (``report/``) show
the same cells from these functions; ``docs/glossary.md`` explains each.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..measuring import format_bytes, format_duration
from ._record import Record, Run

__all__ = ["flags", "peak_memory_cell", "percent_of_peak", "reference_peaks"]


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
    elif m.launch_bound:
        out.append(f"launch-bound (host {format_duration(m.host_per_call or 0)}/call)")
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


def reference_peaks(run: Run) -> dict[str, float]:
    """Device -> the reference FLOP/s a saved run measured for it (the 100% of "% peak"); absent where none."""
    out: dict[str, float] = {}
    for device, description in run.devices.items():
        peak = description.get("reference_peak")
        value = peak.get("FLOP/s") if isinstance(peak, Mapping) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            out[device] = float(value)
    return out
