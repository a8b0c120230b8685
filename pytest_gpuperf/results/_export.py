"""A run's records in the formats of other tools: pytest-benchmark, github-action-benchmark and Bencher.

Each format gives every record its median time per call and, where the samples give one, the
confidence interval of that median (95% unless the run asked for another). Records are named by
their key (the test's node id, plus ``::name`` when a test measures twice), the name the gate
uses, so that a chart follows one test across commits.

* ``pytest-benchmark``: the JSON of ``pytest --benchmark-json`` (``_pytest_benchmark.py``);
  ``pytest-benchmark compare`` reads it, and so does ``pytest-gpuperf compare``.
* ``github-action-benchmark``: the ``customSmallerIsBetter`` list, ``[{"name", "unit", "value",
  "range", "extra"}]``, in nanoseconds; ``range`` is the interval as text (that tool shows it,
  it does not judge by it).
* ``bencher``: Bencher Metric Format, ``{name: {"latency": {"value", "lower_value",
  "upper_value"}}}``, in nanoseconds (Bencher's built-in ``latency`` measure).

A record with too few samples for an interval (fewer than 6 at 95%) gets its median alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from ..measuring import Measurement, format_duration
from ._pytest_benchmark import to_pytest_benchmark
from ._record import Record, Run

__all__ = ["FORMATS", "bencher", "export", "github_action_benchmark"]

_NS: Final = 1e9


def _interval(m: Measurement) -> tuple[float, float] | None:
    """The median's interval in nanoseconds, or None when too few samples claim one."""
    return None if m.too_few_samples else (m.ci.low * _NS, m.ci.high * _NS)


def _extra(record: Record) -> str:
    m = record.measurement
    parts = [f"{record.device} ({m.device_name})" if m.device_name else record.device]
    parts.append(f"{len(m.samples)} samples x {m.iterations} calls")
    parts += [str(m.throughput(unit)) for unit in m.work]
    if m.too_few_samples:
        parts.append(f"too few samples for a {m.confidence:.0%} interval")
    return "; ".join(parts)


def github_action_benchmark(run: Run) -> list[dict[str, Any]]:
    """github-action-benchmark's ``customSmallerIsBetter`` entries: median ns per call, the interval as ``range``."""
    out = []
    for record in run.records:
        m = record.measurement
        entry: dict[str, Any] = {"name": record.key, "unit": "ns", "value": m.median * _NS}
        interval = _interval(m)
        if interval is not None:
            entry["range"] = f"{m.ci.confidence:.0%} CI [{interval[0]:.6g}, {interval[1]:.6g}]"
        entry["extra"] = _extra(record) + f"; median {format_duration(m.median)}"
        out.append(entry)
    return out


def bencher(run: Run) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format: ``latency`` in ns per call, the median's interval as ``lower_value``/``upper_value``."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for record in run.records:
        m = record.measurement
        latency = {"value": m.median * _NS}
        interval = _interval(m)
        if interval is not None:
            latency["lower_value"], latency["upper_value"] = interval
        out[record.key] = {"latency": latency}
    return out


#: Format name -> the converter of a run to that format's JSON value.
FORMATS: Final[dict[str, Callable[[Run], Any]]] = {
    "pytest-benchmark": to_pytest_benchmark,
    "github-action-benchmark": github_action_benchmark,
    "bencher": bencher,
}


def export(run: Run, fmt: str) -> str:
    """``run`` as the JSON text of format ``fmt`` (a key of FORMATS)."""
    if fmt not in FORMATS:
        raise ValueError(f"{fmt!r} is not an export format; use one of {', '.join(FORMATS)}")
    return json.dumps(FORMATS[fmt](run), indent=2) + "\n"
