"""Expectations beyond a single bound: relative estimates judged by their interval, and per-device floors.

``expect_interval`` judges any estimate with a confidence interval (a paired speedup,
a scaling efficiency, a fraction of the peak) the way ``Measurement`` judges its own
throughput: pass when the whole interval is on the right side of the bound, fail when
the whole interval is on the wrong side, inconclusive (a warning, or a failure with
``--gpuperf-inconclusive=fail``) when it straddles the bound.

``Expectations`` reads a JSON file of per-device floors keyed by device name. The
file shipped with the suites holds public datasheet peaks of common data-centre GPUs
and one fraction: a floor is that fraction of the datasheet figure, a level any
healthy device of that model exceeds, not a target.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .measurement import Check, GpuperfAssertionError, InconclusiveWarning, Outcome
from .units import Quantity, UnitError, parse_quantity

__all__ = ["DeviceFloors", "Expectations", "ExpectationsError", "expect_interval"]

SCHEMA: Final = "pytest-gpuperf/expectations"
SCHEMA_VERSION: Final = 1


class ExpectationsError(ValueError):
    """An expectations file that cannot be used; the message names the file, the entry and the fix."""


def expect_interval(
    what: str,
    median: float,
    low: float,
    high: float,
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    evidence: str,
    inconclusive: str = "warn",
    observer: Callable[[Check], None] | None = None,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
) -> Check:
    """Judge an estimate (median and CI ``[low, high]``) against one bound; raise on fail, warn if inconclusive.

    ``evidence`` says where the numbers come from (rounds, device) for the message;
    ``observer`` receives the Check (so it lands in a record, as Measurement's do).
    """
    __tracebackhide__ = True
    if (at_least is None) == (at_most is None):
        raise ValueError(f"{what}: give exactly one of at_least= or at_most=")
    if at_least is not None:
        bound, relation, expected = at_least, ">=", f"at least {fmt(at_least)}"
        outcome: Outcome = "pass" if low >= bound else "fail" if high < bound else "inconclusive"
    else:
        assert at_most is not None
        bound, relation, expected = at_most, "<=", f"at most {fmt(at_most)}"
        outcome = "pass" if high <= bound else "fail" if low > bound else "inconclusive"
    numbers = f"median {fmt(median)}, CI [{fmt(low)}, {fmt(high)}]; {evidence}"
    if outcome == "pass":
        message = f"{what} {expected}: met; {numbers}"
    elif outcome == "fail":
        message = f"{what} {expected} expected, but {numbers}; the whole interval is on the wrong side"
    else:
        message = (
            f"{what} {expected} is inconclusive: the interval straddles the bound; {numbers}. "
            "Measure longer (--gpuperf-max-time) for a verdict"
            + ("" if inconclusive == "fail" else ", or set --gpuperf-inconclusive=fail to fail on this")
        )
    check = Check(what, relation, fmt(bound), outcome, message)
    if observer is not None:
        observer(check)
    if outcome == "fail" or (outcome == "inconclusive" and inconclusive == "fail"):
        raise GpuperfAssertionError(message)
    if outcome == "inconclusive":
        warnings.warn(InconclusiveWarning(message), stacklevel=2)
    return check


# ---------------------------------------------------------------- per-device floors


@dataclass(frozen=True)
class DeviceFloors:
    """One device model's datasheet figures (by workload name) and the floors derived from them."""

    key: str
    source: str
    datasheet: Mapping[str, Quantity]
    fraction: float

    def floor(self, workload: str) -> Quantity | None:
        """``fraction`` of the datasheet figure for ``workload``, or None when the datasheet has none."""
        figure = self.datasheet.get(workload)
        if figure is None:
            return None
        return Quantity(figure.value * self.fraction, figure.unit)


@dataclass(frozen=True)
class Expectations:
    """Per-device floors keyed by device name; see ``for_device`` for how a name is matched."""

    path: Path
    fraction: float
    applies_to: str
    devices: Mapping[str, DeviceFloors]

    @classmethod
    def load(cls, path: Path) -> Expectations:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ExpectationsError(f"{path}: no such expectations file") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise ExpectationsError(f"{path}: cannot read it as JSON ({exc}); fix or replace the file") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("version") != SCHEMA_VERSION:
            raise ExpectationsError(
                f'{path}: not a pytest-gpuperf expectations file (needs "schema": "{SCHEMA}", '
                f'"version": {SCHEMA_VERSION})'
            )
        fraction = data.get("floor_fraction")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ExpectationsError(f"{path}: floor_fraction {fraction!r} must be a number in (0, 1]")
        devices = {
            str(key): _device(path, str(key), entry, float(fraction))
            for key, entry in dict(data.get("devices", {})).items()
        }
        return cls(path, float(fraction), str(data.get("applies_to", "")), devices)

    def for_device(self, device_name: str) -> DeviceFloors | None:
        """The entry whose key appears in ``device_name`` as whole words (case-insensitive); the longest key wins.

        "NVIDIA A100-SXM4-80GB" matches "A100", not "A10"; "NVIDIA A10G" matches neither.
        """
        matches = [
            key
            for key in self.devices
            if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", device_name, re.IGNORECASE)
        ]
        if not matches:
            return None
        return self.devices[max(matches, key=len)]


def _device(path: Path, key: str, entry: Any, fraction: float) -> DeviceFloors:
    if not isinstance(entry, dict) or not isinstance(entry.get("datasheet"), dict) or not entry.get("source"):
        raise ExpectationsError(
            f'{path}: device {key!r} needs "source" (where the figures come from) and "datasheet" '
            '({"workload": "19.5 TFLOP/s", ...})'
        )
    figures: dict[str, Quantity] = {}
    for workload, text in entry["datasheet"].items():
        try:
            figures[str(workload)] = parse_quantity(str(text), kind="rate")
        except UnitError as exc:
            raise ExpectationsError(f"{path}: device {key!r}, {workload}: {exc}") from None
    return DeviceFloors(key, str(entry["source"]), figures, fraction)
