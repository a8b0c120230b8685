"""pytest-gpuperf: deep-learning hardware performance as pytest tests.

The public API. The package's roles, one subpackage each (``docs/architecture.md``):
``measuring`` (the core: devices, sampling, statistics, Measurement, workloads),
``results`` (records, files, fingerprint), ``gate`` (verdicts), ``history`` (asv) and
``plugin`` (the pytest plugin).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import exports

if TYPE_CHECKING:
    from .measuring import (
        Backend,
        Check,
        DeviceSlot,
        Estimate,
        GpuperfAssertionError,
        InconclusiveWarning,
        Measurement,
        MeasureSettings,
        ModeUnsupported,
        NoDeviceWorkWarning,
        Paired,
        Quantity,
        SamplingPlan,
        Step,
        Workload,
        WorkloadUnsupported,
        measure,
        measure_paired,
        parse_quantity,
    )
    from .plugin import Gpuperf, Settings, user_settings
    from .results import Evidence, Record, Run

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "Backend",
    "Check",
    "DeviceSlot",
    "Estimate",
    "Evidence",
    "Gpuperf",
    "GpuperfAssertionError",
    "InconclusiveWarning",
    "MeasureSettings",
    "Measurement",
    "ModeUnsupported",
    "NoDeviceWorkWarning",
    "Paired",
    "Quantity",
    "Record",
    "Run",
    "SamplingPlan",
    "Settings",
    "Step",
    "Workload",
    "WorkloadUnsupported",
    "measure",
    "measure_paired",
    "parse_quantity",
    "user_settings",
]

#: The one place the version is written: pyproject.toml reads it from this file, without importing the package.
__version__ = "0.1.0"
