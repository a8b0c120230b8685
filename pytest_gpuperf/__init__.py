"""pytest-gpuperf: deep-learning hardware performance as pytest tests."""

from __future__ import annotations

from .devices import Backend, DeviceSlot
from .fixture import Gpuperf
from .measurement import Check, GpuperfAssertionError, InconclusiveWarning, Measurement
from .records import Record, Run
from .runner import measure
from .sampling import SamplingPlan
from .settings import Settings
from .units import Quantity, parse_quantity

__all__ = [
    "Backend",
    "Check",
    "DeviceSlot",
    "Gpuperf",
    "GpuperfAssertionError",
    "InconclusiveWarning",
    "Measurement",
    "Quantity",
    "Record",
    "Run",
    "SamplingPlan",
    "Settings",
    "measure",
    "parse_quantity",
]

__version__ = "0.1.0"
