"""The header line and the speedup table (tabulate) of the session's records; ``docs/glossary.md`` explains every
column. The results table is ``results.results_table``, which ``pytest-gpuperf runs show`` uses too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from ..measuring import DeviceSlot, Measurement, MeasureSettings, affinity_cores, counted
from ..results import Record

__all__ = ["Speedup", "device_label", "header_line", "speedup_lines", "speedup_table", "speedups"]


def header_line(slots: Sequence[DeviceSlot], settings: MeasureSettings, torch_module: Any) -> str:
    """``gpuperf: devices cpu (1 thread), cuda:0 NVIDIA H100 80GB HBM3; torch 2.13.0+cpu``: what this run measures on.

    The threads are those the sampler sets on a CPU (``--gpuperf-threads``), else torch's own.
    """
    parts = []
    for slot in slots:
        if not slot.available:
            parts.append(f"{slot.id} (absent)")
        elif slot.kind == "cpu":
            threads = settings.threads_for("cpu") or int(torch_module.get_num_threads())
            parts.append(f"cpu ({counted(threads, 'thread')})")
        elif slot.kind == "cuda":
            parts.append(f"{slot.id} {torch_module.cuda.get_device_name(slot.index or 0)}")
        else:
            parts.append(slot.id)
    return f"gpuperf: devices {', '.join(parts)}; torch {torch_module.__version__}"


# ---------------------------------------------------------------- several devices


@dataclass(frozen=True)
class Speedup:
    """How many times faster ``device`` ran a test than ``base`` did, from their medians.

    ``low``/``high`` combine the two medians' confidence intervals (each at the
    measurement's confidence, so jointly at least 1 - 2(1 - confidence): 90% from two
    95% intervals). ``note`` flags a comparison of unlike runs (different sizes).
    """

    test: str
    base: str
    device: str
    unit: str  # the work unit compared, or "time" when the two share none
    value: float
    low: float
    high: float
    note: str = ""
    #: the threads each side's measurement ran at (its record's, or the CPU's all-core measurement's)
    base_threads: int = 0
    device_threads: int = 0


def device_free_key(record: Record) -> str:
    """The record's key with its device parameter removed, so one test's records on several devices match."""
    key, device = record.key, record.device
    return key.replace(f"[{device}]", "").replace(f"-{device}]", "]").replace(f"[{device}-", "[")


def _speedup(test: str, base: Record, other: Record, headline: Mapping[str, Measurement]) -> Speedup:
    # Each side's step time (its median), the CPU's at all its cores where it was measured so for this table.
    b, o = headline.get(base.key, base.measurement), headline.get(other.key, other.measurement)
    unit = next((u for u in b.work if u in o.work), "")
    # rate_x(t) = work_x / t: the speedup is the ratio of rates, which for equal work is the ratio of times.
    work_b = b.work[unit] if unit else 1.0
    work_o = o.work[unit] if unit else 1.0
    value = (work_o / o.median) / (work_b / b.median)
    low = (work_o / o.ci.high) / (work_b / b.ci.low) if b.ci.low > 0 else 0.0
    high = (work_o / o.ci.low) / (work_b / b.ci.high) if o.ci.low > 0 else float("inf")
    differing = sorted(k for k in set(base.params) | set(other.params) if base.params.get(k) != other.params.get(k))
    note = ""
    if differing:
        parts = [f"{k} {base.params.get(k, '-')} vs {other.params.get(k, '-')}" for k in differing]
        note = "unlike runs: " + ", ".join(parts)
    compared = f"{unit}/s" if unit else "time"
    return Speedup(test, base.device, other.device, compared, value, low, high, note, b.threads, o.threads)


def speedups(
    records: Sequence[Record], devices: Sequence[str], headline: Mapping[str, Measurement] | None = None
) -> list[Speedup]:
    """For every test measured on the first of ``devices`` and on another: the other's speedup against the first.

    ``headline``: record key -> the CPU side measured again at all its cores (the record book's), used in place of
    the record's own measurement."""
    if len(devices) < 2:
        return []
    groups: dict[str, dict[str, Record]] = {}
    for record in records:
        groups.setdefault(device_free_key(record), {})[record.device] = record
    out: list[Speedup] = []
    base_device = devices[0]
    for test, by_device in groups.items():
        base = by_device.get(base_device)
        if base is None:
            continue
        for device in devices[1:]:
            other = by_device.get(device)
            if other is not None:
                out.append(_speedup(test.split("::", 1)[-1], base, other, headline or {}))
    return out


def device_label(device: str, threads: int, descriptions: Mapping[str, Mapping[str, Any]], cores: int) -> str:
    """``cuda:0 NVIDIA H100 80GB HBM3``, ``cpu Intel Xeon ... (16 of 16 cores)``: a device with what it ran as."""
    name = str(descriptions.get(device, {}).get("name", "")).strip()
    label = f"{device} {name}" if name else device
    if device.split(":", 1)[0] == "cpu" and threads > 0:
        label += f" ({threads} of {cores} cores)"
    return label


def speedup_table(
    records: Sequence[Record],
    devices: Sequence[str],
    *,
    headline: Mapping[str, Measurement] | None = None,
    descriptions: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The speedups of :func:`speedups` as a table, or '' when fewer than two devices have a common test.

    Each row names its two devices with their configuration (``descriptions``: the devices' ``describe()``; a CPU
    with the threads it ran at of the cores of its affinity)."""
    cores = affinity_cores()
    rows = [
        (
            s.test,
            f"{device_label(s.device, s.device_threads, descriptions or {}, cores)} vs "
            f"{device_label(s.base, s.base_threads, descriptions or {}, cores)}",
            f"{s.value:.3g}x",
            f"[{s.low:.3g}x, {s.high:.3g}x]",
            s.unit,
            s.note,
        )
        for s in speedups(records, devices, headline)
    ]
    if not rows:
        return ""
    headers = ("test", "devices", "speedup", "CI (>=90%)", "compared", "note")
    return tabulate(rows, headers=headers, disable_numparse=True)


def speedup_lines(records: Sequence[Record], headline: Mapping[str, Measurement], seconds: float) -> list[str]:
    """The lines under the speedup table: what each side's time is, and what the CPU's all-core figures cost."""
    lines = [
        "speedup: each device's median step time (or throughput) on data already resident in its own memory: no "
        "copy between host and device is timed"
    ]
    # The CPU rows of the table: CPU records of tests measured on another device too.
    elsewhere = {device_free_key(r) for r in records if r.device.split(":", 1)[0] != "cpu"}
    cpu = [r for r in records if r.device.split(":", 1)[0] == "cpu" and device_free_key(r) in elsewhere]
    again = [r for r in cpu if r.key in headline]
    if again:
        threads = sorted({headline[r.key].threads for r in again})
        kept = sorted({r.measurement.threads for r in again})
        lines.append(
            f"speedup: the CPU at {'/'.join(map(str, threads))} threads (all the cores of its affinity), measured "
            f"again for this table ({len(again)} measurements, {seconds:.1f} s); its records, the results table and "
            f"the gate keep {'/'.join(map(str, kept))} thread{'s' if kept != [1] else ''}, the stable default"
        )
    if len(again) < len(cpu):
        lines.append(
            "speedup: a CPU row not measured again (the benchmark fixture, xdist, torchrun) compares the CPU at the "
            "threads its row shows"
        )
    return lines
