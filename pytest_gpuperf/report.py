"""Terminal tables (tabulate) of the session's records."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from .records import Record
from .units import format_bytes, format_duration

__all__ = ["flags", "results_table"]

HEADERS = ("test", "device", "median", "95% CI", "throughput", "peak mem", "samples", "flags")


def flags(record: Record) -> str:
    m = record.measurement
    out: list[str] = []
    if not m.converged:
        out.append("not converged")
    if not m.warmup.steady:
        out.append("warmup capped")
    for check in record.checks:
        if check.outcome != "pass":
            out.append(f"{check.what} {check.outcome}")
    return ", ".join(out)


def short_test(record: Record) -> str:
    """The test id without its file part and device parameter, which have their own column."""
    function = record.test.split("::")[-1]
    base, bracket, params = function.partition("[")
    if bracket:
        kept = [p for p in params.rstrip("]").split("-") if p != record.device]
        base = f"{base}[{'-'.join(kept)}]" if kept else base
    suffix = record.key[len(record.test) :]  # "::name" when a test measures more than once
    return base + suffix


def results_table(records: Sequence[Record], *, tablefmt: str = "simple") -> str:
    rows = []
    for record in records:
        m = record.measurement
        throughput = ", ".join(str(m.throughput(unit)) for unit in m.work)
        rows.append(
            (
                short_test(record),
                record.device,
                format_duration(m.median),
                f"+-{m.relative_ci:.1%}",
                throughput or "-",
                "-" if m.peak_memory is None else format_bytes(m.peak_memory),
                f"{len(m.samples)}x{m.iterations}",
                flags(record),
            )
        )
    return tabulate(rows, headers=HEADERS, tablefmt=tablefmt, disable_numparse=True)
