"""The measuring core: devices and backends, sampling, statistics, units, Measurement, paired rounds, workloads.

Usable without pytest (``measure(fn, device="cuda", flops=...)``); it imports neither
pytest nor the results, gate or history packages. torch is imported only when a device
is used, never at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from . import _values as values
    from ._backends import (
        AllCudaBackend,
        Backend,
        ModeUnsupported,
        backend_for,
    )
    from ._calls import torch_threads
    from ._clocks import (
        ClockSummary,
        import_nvml,
        match_nvml_device,
        nvml_field,
        read_clocks,
        throttle_names,
    )
    from ._devices import (
        BIND_ENV,
        KINDS,
        Binding,
        DeviceError,
        DeviceSlot,
        Inventory,
        bind,
        cpu_model,
        open_device,
        parse_device_option,
        probe_inventory,
        resolve_devices,
        resolve_slots,
    )
    from ._distributed import DistributedError, TorchDistCoordinator, World, backend_for_kind, scaling_sizes, spawn
    from ._expectations import EXPECTATIONS_ENV, Expectations, expectations_path
    from ._judge import (
        Check,
        GpuperfAssertionError,
        InconclusiveWarning,
        JudgeContext,
        expect_estimate,
    )
    from ._load import SLACK_CORES, Load, Monitor, affinity_cores, needed_cores, wait_for_quiet
    from ._measurement import Measurement, NoDeviceWorkWarning
    from ._memory import MEMORY, MemoryChange
    from ._paired import Paired, StepFactory, measure_paired
    from ._profile import (
        SHOWN_CHANGES,
        OpStat,
        WorkComparison,
        WorkProfile,
    )
    from ._profiler import PROFILE, profiles_of
    from ._reading import Around, Change, Reading, readings, register_reading
    from ._runner import Coordinator, FixedCall, Subject, measure, measure_fixed, measure_on, work_from
    from ._sampling import FixedBudget, SamplingPlan, Warmup
    from ._settings import CATEGORIES, MEASURE_FIELDS, SIZES, THROTTLE_THRESHOLD, MeasureSettings
    from ._stats import (
        Estimate,
        format_coverage,
        median,
        median_ci,
        min_samples_for,
        quantile,
        quantile_ci,
        summarize,
        t_quantile,
        t_two_sided_p,
    )
    from ._timing_checks import TIMING_CHECKS, TimingChecks, timing_flags
    from ._units import (
        Quantity,
        clipped,
        counted,
        duration_unit,
        format_bytes,
        format_duration,
        format_rate,
        parse_quantity,
    )
    from ._values import SettingError, Threads, optional
    from ._workload import Step, Workload, WorkloadUnsupported, resolve_size

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "BIND_ENV",
    "CATEGORIES",
    "EXPECTATIONS_ENV",
    "KINDS",
    "MEASURE_FIELDS",
    "MEMORY",
    "PROFILE",
    "SHOWN_CHANGES",
    "SIZES",
    "SLACK_CORES",
    "THROTTLE_THRESHOLD",
    "TIMING_CHECKS",
    "AllCudaBackend",
    "Around",
    "Backend",
    "Binding",
    "Change",
    "Check",
    "ClockSummary",
    "Coordinator",
    "DeviceError",
    "DeviceSlot",
    "DistributedError",
    "Estimate",
    "Expectations",
    "FixedBudget",
    "FixedCall",
    "GpuperfAssertionError",
    "InconclusiveWarning",
    "Inventory",
    "JudgeContext",
    "Load",
    "MeasureSettings",
    "Measurement",
    "MemoryChange",
    "ModeUnsupported",
    "Monitor",
    "NoDeviceWorkWarning",
    "OpStat",
    "Paired",
    "Quantity",
    "Reading",
    "SamplingPlan",
    "SettingError",
    "Step",
    "StepFactory",
    "Subject",
    "Threads",
    "TimingChecks",
    "TorchDistCoordinator",
    "Warmup",
    "WorkComparison",
    "WorkProfile",
    "Workload",
    "WorkloadUnsupported",
    "World",
    "affinity_cores",
    "backend_for",
    "backend_for_kind",
    "bind",
    "clipped",
    "counted",
    "cpu_model",
    "duration_unit",
    "expect_estimate",
    "expectations_path",
    "format_bytes",
    "format_coverage",
    "format_duration",
    "format_rate",
    "import_nvml",
    "match_nvml_device",
    "measure",
    "measure_fixed",
    "measure_on",
    "measure_paired",
    "median",
    "median_ci",
    "min_samples_for",
    "needed_cores",
    "nvml_field",
    "open_device",
    "optional",
    "parse_device_option",
    "parse_quantity",
    "probe_inventory",
    "profiles_of",
    "quantile",
    "quantile_ci",
    "read_clocks",
    "readings",
    "register_reading",
    "resolve_devices",
    "resolve_size",
    "resolve_slots",
    "scaling_sizes",
    "spawn",
    "summarize",
    "t_quantile",
    "t_two_sided_p",
    "throttle_names",
    "timing_flags",
    "torch_threads",
    "values",
    "wait_for_quiet",
    "work_from",
]
