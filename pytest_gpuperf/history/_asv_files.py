"""asv's file formats, as pytest-gpuperf writes and reads them: results rows, benchmarks.json, machine.json.

The column order is asv's own (``asv/results.py``, ``Results.save``); a row keeps, per
device (the one asv parameter), the median, the 99% interval of the median, the
quartiles, calls per sample and the raw samples.

A measurement with fewer samples than a distribution-free 99% interval of the median
needs (8) has no interval: its statistics columns are left empty (``null``) rather than
filled with the samples' range, which covers less than 99%. asv then reads no statistics
for that device and compares it by its factor alone, as it does a single sample.

A point refused as too wide for a history (``history record --anchor``: ``_anchored.py``) is written
with no value (``null``, which asv draws as no point and ``asv compare`` lists as failed) and no
statistics; its samples stay, and why it was refused is kept beside the rows, under ``REFUSED``
(a key of the results file that asv's reader ignores): ``{benchmark: {device: reason}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._jsonfile import JsonFileError, read_json
from ..measuring import median, optional, summarize
from ..results import ResultsError, atomic_write_text

__all__ = [
    "BENCHMARKS_API",
    "CI",
    "COLUMNS",
    "FORMAT",
    "MACHINE_API",
    "REFUSED",
    "RESULTS_API",
    "UNIT",
    "AsvError",
    "Point",
    "load_json",
    "points_of",
    "read_results",
    "refused_reasons",
    "row_of",
    "unrepr",
    "write_json",
]

#: The ``version`` of every benchmark written here; bump it only when the values change meaning.
FORMAT: Final = "pytest-gpuperf-asv-1"
UNIT: Final = "seconds"
#: The names of the benchmarks ``history record --anchor`` writes start with this (``_anchored.py``).
ANCHORED: Final = "ab_vs_"
RESULTS_API: Final = 2
#: The results file's key of the refused points' reasons (the module's docstring); asv's reader ignores it.
REFUSED: Final = "pytest_gpuperf_refused"
BENCHMARKS_API: Final = 2
MACHINE_API: Final = 1
#: asv's results columns, in its order (asv/results.py ``Results.save``).
COLUMNS: Final = (
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
    "profile",
)
#: The confidence of the interval asv keeps (its ``stats_ci_99`` columns).
CI: Final = 0.99


class AsvError(ResultsError):
    """asv results that cannot be written or read; the message names the file or input and the fix."""


@dataclass(frozen=True)
class Point:
    """One benchmark on one device: what asv keeps of a measurement."""

    median: float
    ci_low: float | None  # None: too few samples for a 99% interval (then no statistics are written)
    ci_high: float | None
    q1: float | None
    q3: float | None
    number: int | None
    samples: tuple[float, ...]
    started_at: int
    duration: float
    #: why the point is no value of the history ("": it is one); written to asv as no value, the reason under REFUSED
    refused: str = ""

    @classmethod
    def of(cls, values: Sequence[float], number: int, started_at: int, duration: float) -> Point:
        """The point of ``values`` (samples or ratios): median, 99% interval (none from too few values), quartiles."""
        s = summarize(values, CI)
        low, high = (None, None) if s.ci.falls_short(CI) else (s.ci.low, s.ci.high)
        return cls(s.median, low, high, s.q1, s.q3, number, tuple(values), started_at, duration)

    def stats(self) -> tuple[float | None, float | None, float | None, float | None, int | None, int | None]:
        """The statistics columns: ci_99_a, ci_99_b, q_25, q_75, number, repeat; all None without an interval
        (asv reads an empty statistics entry as none at all; a partial one would send it to a missing key); all None
        for a refused point too."""
        if self.refused or self.ci_low is None or self.ci_high is None:
            return None, None, None, None, None, None
        return self.ci_low, self.ci_high, self.q1, self.q3, self.number, len(self.samples)


def row_of(by_device: Mapping[str, Point]) -> list[Any]:
    """One benchmark's row of an asv results file (``COLUMNS``), a Point per device parameter."""
    devices = sorted(by_device)
    ps = [by_device[d] for d in devices]
    return [
        [None if p.refused else p.median for p in ps],
        [[repr(d) for d in devices]],
        FORMAT,
        max(p.started_at for p in ps),
        sum(p.duration for p in ps),
        *([p.stats()[column] for p in ps] for column in range(6)),
        [list(p.samples) for p in ps],
        None,
    ]


def _points_of_row(row: Sequence[Any] | None, refused: Mapping[str, str] | None = None) -> dict[str, Point]:
    """Points of a row this module wrote earlier (same version, one device parameter); other rows are replaced.

    ``refused``: the benchmark's entry of the file's ``REFUSED`` (device -> reason): a device with no value and a
    reason there is a refused point (its median that of its samples); one with no value and no reason is none."""
    if not row or len(row) < len(COLUMNS) - 1:
        return {}
    cols = dict(zip(COLUMNS, row, strict=False))
    if cols["version"] != FORMAT or not cols["params"] or len(cols["params"]) != 1:
        return {}
    out: dict[str, Point] = {}

    def stat(name: str, i: int, kind: type[float] | type[int]) -> Any:
        values = cols[name]  # asv writes a column whose entries are all empty as null
        value = values[i] if isinstance(values, list) else None
        return optional(value, kind)

    for i, device in enumerate(unrepr(p) for p in cols["params"][0]):
        try:
            samples = tuple(float(x) for x in cols["samples"][i])
            value, why = cols["result"][i], (refused or {}).get(device, "")
            if value is not None:
                why = ""
            elif why and samples:
                value = median(samples)
            out[device] = Point(
                float(value),
                stat("stats_ci_99_a", i, float),
                stat("stats_ci_99_b", i, float),
                stat("stats_q_25", i, float),
                stat("stats_q_75", i, float),
                stat("stats_number", i, int),
                samples,
                int(cols["started_at"]),
                float(cols["duration"]) / len(cols["params"][0]),
                why,
            )
        except (TypeError, ValueError, IndexError):
            continue
    return out


def points_of(data: Mapping[str, Any], name: str) -> dict[str, Point]:
    """Points of benchmark ``name`` in a results file as ``read_results`` returns it: its row, and its refused
    points' reasons (``REFUSED``; an entry that is not text is no reason)."""
    rows, refused = data.get("results"), data.get(REFUSED)
    row = rows.get(name) if isinstance(rows, dict) else None
    reasons = refused.get(name) if isinstance(refused, dict) else None
    why = {str(d): r for d, r in reasons.items() if isinstance(r, str)} if isinstance(reasons, dict) else {}
    return _points_of_row(row, why)


def refused_reasons(points: Mapping[str, Point]) -> dict[str, str]:
    """The ``REFUSED`` entry of one benchmark: device -> reason, for its refused points."""
    return {device: p.refused for device, p in sorted(points.items()) if p.refused}


def unrepr(value: object) -> str:
    text = str(value)
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def read_results(path: Path) -> dict[str, Any]:
    """An asv results file as a dict (its ``version`` checked and kept out); AsvError names the file and the fix."""
    return load_json(path, RESULTS_API)


def load_json(path: Path, api: int) -> dict[str, Any]:
    try:
        data = read_json(Path(path))
    except JsonFileError as exc:
        if exc.problem in ("missing", "directory", "unreadable"):
            raise AsvError(str(exc)) from None
        raise AsvError(f"{exc}; it was left as it is: delete it, or point --gpuperf-asv at another directory") from None
    found = data.get("version") if isinstance(data, dict) else None
    if not isinstance(data, dict) or found != api:
        raise AsvError(
            f"{path} is not an asv file of api version {api} (its version: {found!r}); "
            "run `asv update` on that results directory, or point --gpuperf-asv at another directory"
        )
    data.pop("version")
    return data


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    text = json.dumps(data, indent=1, allow_nan=True)
    atomic_write_text(path, text + "\n")
