"""Environment fingerprint: everything a later comparison needs to know about the machine and software.

Collected once per session and stored with every run (its keys are part of the results
schema). NVML (``pip install nvidia-ml-py``) adds clocks, power and throttle reasons on
NVIDIA machines; without it those keys are absent. Which differences block a comparison
is decided in ``_comparable.py``.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any, Final

from .._git import git_state
from ..measuring import cpu_model

__all__ = ["THROTTLE_REASONS", "collect", "throttle_names"]

#: NVML clocks-event (throttle) reason bits, by name.
THROTTLE_REASONS: Final[dict[int, str]] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def _torch_facts(torch: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "mkl": bool(torch.backends.mkl.is_available()),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "mps": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
    }
    hip = getattr(torch.version, "hip", None)
    if hip:
        facts["torch_hip"] = hip
    if torch.cuda.is_available():
        facts["cuda_driver"] = _cuda_driver(torch)
        facts["cuda_devices"] = [_cuda_device(torch, i) for i in range(torch.cuda.device_count())]
    return facts


def _cuda_device(torch: Any, index: int) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(index)
    return {
        "index": index,
        "name": str(props.name),
        "capability": f"{props.major}.{props.minor}",
        "memory_bytes": int(props.total_memory),
        "multiprocessors": int(getattr(props, "multi_processor_count", 0)),
    }


def _cuda_driver(torch: Any) -> str | None:
    """The CUDA driver API version (``12.4``); torch has no public call for it, hence the guarded private one."""
    query = getattr(torch._C, "_cuda_getDriverVersion", None)
    try:
        version = int(query()) if query is not None else None
    except Exception:  # noqa: BLE001 - a fingerprint must never fail a run
        version = None
    return None if not version else f"{version // 1000}.{version % 1000 // 10}"


def throttle_names(bits: int) -> list[str]:
    """Names of the NVML throttle-reason bits set in ``bits``; unknown bits as hex."""
    names = [name for bit, name in THROTTLE_REASONS.items() if bits & bit]
    unknown = bits & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(hex(unknown))
    return names


def _nvml_gpu(pynvml: Any, index: int) -> dict[str, Any]:
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons"):
        reasons = int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h))
    else:
        reasons = int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
    name = pynvml.nvmlDeviceGetName(h)
    return {
        "index": index,
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
        "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "throttle_reasons": throttle_names(reasons),
    }


def _nvml_facts(module: Any = None) -> dict[str, Any] | None:
    """Driver, clocks, power and throttle reasons per GPU through NVML, when nvidia-ml-py is installed."""
    pynvml = module
    if pynvml is None:
        try:
            pynvml = __import__("pynvml")
        except ImportError:
            return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: nothing to add
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        return {
            "driver": driver.decode() if isinstance(driver, bytes) else str(driver),
            "gpus": [_nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())],
        }
    except Exception:  # noqa: BLE001 - a fingerprint must never fail a run
        return None
    finally:
        pynvml.nvmlShutdown()


def collect(root: Path | None = None, *, torch_module: Any = None, nvml_module: Any = None) -> dict[str, Any]:
    """Everything a later comparison needs; keys are stable (they are part of the results schema)."""
    fingerprint: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    fingerprint.update(_torch_facts(torch_module if torch_module is not None else __import__("torch")))
    nvml = _nvml_facts(nvml_module)
    if nvml is not None:
        fingerprint["nvml"] = nvml
    if root is not None:
        fingerprint["git"] = git_state(root)
    return fingerprint
