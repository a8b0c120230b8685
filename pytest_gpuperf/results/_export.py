"""A run's records in the formats of other tools: pytest-benchmark, github-action-benchmark and Bencher.

Each format gives every record its median time per call and, where the samples give one, the
confidence interval of that median (95% unless the run asked for another), each figure to six
significant digits (``_digits.py``: the float noise of a division dropped). Records are named by
their key (the test's node id, plus ``::name`` when a test measures twice), the name the gate
uses, so that a chart follows one test across commits.

* ``pytest-benchmark``: the JSON of ``pytest --benchmark-json`` (``_pytest_benchmark.py``);
  ``pytest-benchmark compare`` reads it, and so does ``pytest-gpuperf compare``.
* ``github-action-benchmark``: the ``customSmallerIsBetter`` list, ``[{"name", "unit", "value",
  "range", "extra"}]``, in nanoseconds; ``range`` is the interval as text (that tool shows it,
  it does not judge by it), ``>=95% CI [1198320, 1201680]``: labelled with the level every interval
  reaches at least, in fixed notation.
* ``bencher``: Bencher Metric Format, ``{name: {"latency": {"value", "lower_value",
  "upper_value"}}}``, in nanoseconds (Bencher's built-in ``latency`` measure).

A record with too few samples for an interval (fewer than 6 at 95%) gets its median alone. A run that
names a record twice (a file edited or merged by hand: a session keeps one record per test) is refused.

``export -o`` replaces only an export of the same format that this tool wrote (``EXPORT_OUTPUTS``): a
pytest-benchmark export by its ``machine_info.gpuperf`` entry, which pytest-benchmark itself never writes;
the other two formats have no room for a mark their readers would not take for data (a Bencher key is a
benchmark), so they are recognised by their exact shape and by the layout ``export`` writes (2-space JSON,
one trailing newline): a file another tool wrote or a person edited is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from ..measuring import Measurement, format_coverage, format_duration
from ._digits import exported, exported_text
from ._files import RECOGNISE_LIMIT, OutputKind, ResultsError, head_bytes
from ._pytest_benchmark import to_pytest_benchmark
from ._record import Record, Run

__all__ = ["EXPORT_OUTPUTS", "FORMATS", "bencher", "export", "github_action_benchmark"]

_NS: Final = 1e9


def _interval(m: Measurement) -> tuple[float, float] | None:
    """The median's interval in nanoseconds, or None when too few samples claim one."""
    return None if m.too_few_samples else (exported(m.ci.low * _NS), exported(m.ci.high * _NS))


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
        entry: dict[str, Any] = {"name": record.key, "unit": "ns", "value": exported(m.median * _NS)}
        interval = _interval(m)
        if interval is not None:
            # An interval of order statistics covers at least the confidence asked for (more, by a count's
            # discreteness, which differs row to row): the label is that level, the same on every row.
            low, high = (exported_text(end) for end in interval)
            entry["range"] = f">={format_coverage(m.confidence)} CI [{low}, {high}]"
        entry["extra"] = _extra(record) + f"; median {format_duration(m.median)}"
        out.append(entry)
    return out


def bencher(run: Run) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format: ``latency`` in ns per call, the median's interval as ``lower_value``/``upper_value``."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for record in run.records:
        m = record.measurement
        latency = {"value": exported(m.median * _NS)}
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
    keys = [record.key for record in run.records]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:  # github-action-benchmark would chart both, Bencher keep the last silently: refused instead
        raise ResultsError(
            f"the run holds {', '.join(twice)} more than once, and every format names a benchmark once; a session "
            "keeps one record per test (a rerun's last attempt), so this file was edited or merged: keep one of each"
        )
    return json.dumps(FORMATS[fmt](run), indent=2) + "\n"


# ------------------------------------------------------------------ recognising our own exports (export -o)


def _as_written(path: Path) -> Any:
    """The JSON value of ``path`` if its text is exactly what ``export`` writes for that value, else None."""
    data = head_bytes(path, RECOGNISE_LIMIT + 1)
    if data is None or len(data) > RECOGNISE_LIMIT:
        return None
    try:
        text = data.decode("utf-8")
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if json.dumps(value, indent=2) + "\n" == text else None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_pytest_benchmark_export(path: Path) -> bool:
    data = _as_written(path)
    info = data.get("machine_info") if isinstance(data, Mapping) else None
    return isinstance(info, Mapping) and isinstance(info.get("gpuperf"), Mapping)


def _is_github_action_benchmark_export(path: Path) -> bool:
    data = _as_written(path)
    return isinstance(data, list) and all(
        isinstance(entry, Mapping)
        and {"name", "unit", "value", "extra"} <= entry.keys() <= {"name", "unit", "value", "range", "extra"}
        and entry["unit"] == "ns"
        and _is_number(entry["value"])
        for entry in data
    )


def _is_bencher_export(path: Path) -> bool:
    data = _as_written(path)
    return isinstance(data, Mapping) and all(
        isinstance(measures, Mapping)
        and measures.keys() == {"latency"}
        and isinstance(metric := measures["latency"], Mapping)
        and "value" in metric
        and metric.keys() <= {"value", "lower_value", "upper_value"}
        and all(_is_number(v) for v in metric.values())
        for measures in data.values()
    )


#: Format name -> the kind of file ``export -o`` writes in it, and how one it wrote is recognised.
EXPORT_OUTPUTS: Final[dict[str, OutputKind]] = {
    "pytest-benchmark": OutputKind("pytest-benchmark export", "benchmark.json", _is_pytest_benchmark_export),
    "github-action-benchmark": OutputKind(
        "github-action-benchmark export", "benchmark.json", _is_github_action_benchmark_export
    ),
    "bencher": OutputKind("bencher export", "bmf.json", _is_bencher_export),
}
