"""Per-device floors: what any healthy device of a model reaches, from a JSON file of datasheet figures.

``Expectations`` reads a JSON file of per-device floors keyed by device name. The
file shipped with the suites holds public datasheet peaks of common data-centre GPUs
and one fraction: a floor is that fraction of the datasheet figure, a level any
healthy device of that model exceeds, not a target. The same figures are ceilings:
no step runs above its device's datasheet peak (``DeviceFloors.ceiling``; the timing
checks flag a rate above it, ``_timing_checks.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .._jsonfile import JsonFileError, read_json
from ._units import Quantity, UnitError, parse_quantity

__all__ = ["EXPECTATIONS_ENV", "DeviceFloors", "Expectations", "ExpectationsError", "expectations_path"]

SCHEMA: Final = "pytest-gpuperf/expectations"
SCHEMA_VERSION: Final = 1
#: Environment variable naming another expectations file than the one shipped with the suites.
EXPECTATIONS_ENV: Final = "GPUPERF_EXPECTATIONS"
#: Where the suites' file lies: installed beside the package's suites (a wheel), or in a clone's ``suites/``.
_SHIPPED: Final = (
    Path(__file__).resolve().parents[1] / "suites" / "expectations.json",
    Path(__file__).resolve().parents[2] / "suites" / "expectations.json",
)


def expectations_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """The expectations file in use: ``$GPUPERF_EXPECTATIONS`` where it is set, else the one shipped with the
    suites; None where there is neither."""
    named = (os.environ if environ is None else environ).get(EXPECTATIONS_ENV)
    if named:
        return Path(named)
    return next((path for path in _SHIPPED if path.is_file()), None)


class ExpectationsError(ValueError):
    """An expectations file that cannot be used; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class DeviceFloors:
    """One device model's datasheet figures (by workload name), the floors derived from them, and its ceilings."""

    key: str
    source: str
    datasheet: Mapping[str, Quantity]
    fraction: float
    #: where the key covers parts of different figures (the lowest is the datasheet's, for a floor that holds on
    #: each), the highest of them, by workload (the entry's ``"ceiling"``)
    ceilings: Mapping[str, Quantity] = field(default_factory=dict)

    def floor(self, workload: str) -> Quantity | None:
        """``fraction`` of the datasheet figure for ``workload``, or None when the datasheet has none."""
        figure = self.datasheet.get(workload)
        if figure is None:
            return None
        return Quantity(figure.value * self.fraction, figure.unit)

    def ceiling(self, workload: str) -> Quantity | None:
        """The most any part of this key reaches in ``workload``: its ``"ceiling"`` figure, else the datasheet's;
        None when the datasheet has none."""
        return self.ceilings.get(workload) or self.datasheet.get(workload)


@dataclass(frozen=True)
class Expectations:
    """Per-device floors keyed by device name; see ``for_device`` for how a name is matched."""

    path: Path
    fraction: float
    devices: Mapping[str, DeviceFloors]

    @classmethod
    def load(cls, path: Path, section: str | None = None) -> Expectations:
        """The file's top-level floors, or with ``section`` those of the block of that name (its own
        ``floor_fraction`` and ``devices``; ``applies_to`` is for the reader, such as ``"bandwidth"``)."""
        path = Path(path)
        try:
            data = read_json(path)
        except JsonFileError as exc:
            if exc.problem == "missing":
                raise ExpectationsError(f"{path}: no such expectations file") from None
            raise ExpectationsError(f"{path}: cannot read it as JSON ({exc.detail}); fix or replace the file") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("version") != SCHEMA_VERSION:
            raise ExpectationsError(
                f'{path}: not a pytest-gpuperf expectations file (needs "schema": "{SCHEMA}", '
                f'"version": {SCHEMA_VERSION})'
            )
        where = ""
        if section is not None:
            data = data.get(section)
            where = f" {section!r}"
            if not isinstance(data, dict):
                raise ExpectationsError(
                    f'{path}: no block {section!r} (needs "{section}": {{"floor_fraction": ..., "devices": ...}})'
                )
        fraction = data.get("floor_fraction")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ExpectationsError(f"{path}:{where} floor_fraction {fraction!r} must be a number in (0, 1]")
        devices = {
            str(key): _device(path, str(key), entry, float(fraction))
            for key, entry in dict(data.get("devices", {})).items()
        }
        return cls(path, float(fraction), devices)

    def for_device(self, device_name: str) -> DeviceFloors | None:
        """The entry whose key appears in ``device_name`` as whole words (case-insensitive); the longest key wins.

        "NVIDIA A100-SXM4-80GB" matches "A100", not "A10"; "NVIDIA A10G" matches neither. A MIG
        slice ("NVIDIA H100 80GB HBM3 MIG 1g.10gb") matches nothing (``why_none``).
        """
        if self.why_none(device_name):
            return None
        matches = [
            key
            for key in self.devices
            if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", device_name, re.IGNORECASE)
        ]
        if not matches:
            return None
        return self.devices[max(matches, key=len)]

    @staticmethod
    def why_none(device_name: str) -> str | None:
        """Why a device gets no floors although its model is listed, or None.

        A MIG slice has a share of the GPU's SMs and memory bandwidth (a 1g slice of an
        H100: 16 of 132 SMs), so the full GPU's datasheet figure does not apply, and the
        share of the figure a slice reaches is not on any datasheet: no floor is asserted.
        """
        if re.search(r"(?<![A-Za-z0-9])MIG(?![A-Za-z0-9])", device_name):
            return (
                f"{device_name!r} is a MIG slice: the full GPU's datasheet figures do not apply to a share of its "
                "SMs, so no floor is asserted"
            )
        return None


def _device(path: Path, key: str, entry: Any, fraction: float) -> DeviceFloors:
    if not isinstance(entry, dict) or not isinstance(entry.get("datasheet"), dict) or not entry.get("source"):
        raise ExpectationsError(
            f'{path}: device {key!r} needs "source" (where the figures come from) and "datasheet" '
            '({"workload": "19.5 TFLOP/s", ...})'
        )
    ceilings = entry.get("ceiling", {})
    if not isinstance(ceilings, dict):
        raise ExpectationsError(f'{path}: device {key!r}: "ceiling" must be {{"workload": "2039 GB/s", ...}}')
    figures, highest = _figures(path, key, entry["datasheet"]), _figures(path, key, ceilings)
    return DeviceFloors(key, str(entry["source"]), figures, fraction, highest)


def _figures(path: Path, key: str, texts: Mapping[str, Any]) -> dict[str, Quantity]:
    figures: dict[str, Quantity] = {}
    for workload, text in texts.items():
        try:
            figures[str(workload)] = parse_quantity(str(text), kind="rate")
        except UnitError as exc:
            raise ExpectationsError(f"{path}: device {key!r}, {workload}: {exc}") from None
    return figures
