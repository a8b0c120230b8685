"""Environment fingerprint: what a later comparison needs to know about the machine and software.

Collected once per session. NVML (``pip install nvidia-ml-py``) adds clocks,
power and throttle reasons on NVIDIA machines; without it those keys are absent.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from .devices import cpu_model

__all__ = ["collect", "git_state"]


def git_state(root: Path) -> dict[str, Any]:
    """Commit, branch and whether the tree was dirty; empty when ``root`` is not in a git work tree."""

    def run(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = run("rev-parse", "HEAD")
    if commit is None:
        return {}
    status = run("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "branch": run("rev-parse", "--abbrev-ref", "HEAD") or "",
        "dirty": bool(status),
    }


def _torch_facts() -> dict[str, Any]:
    torch: Any = __import__("torch")

    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "mkl": bool(torch.backends.mkl.is_available()),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
    }
    hip = getattr(torch.version, "hip", None)
    if hip:
        facts["torch_hip"] = hip
    if torch.cuda.is_available():
        facts["cuda_driver"] = _cuda_driver(torch)
        facts["cuda_devices"] = [
            {
                "index": i,
                "name": torch.cuda.get_device_name(i),
                "capability": "{}.{}".format(*torch.cuda.get_device_capability(i)),
                "memory_bytes": int(torch.cuda.get_device_properties(i).total_memory),
            }
            for i in range(torch.cuda.device_count())
        ]
    return facts


def _cuda_driver(torch: Any) -> str | None:
    try:
        version = int(torch.cuda.driver_version()) if hasattr(torch.cuda, "driver_version") else None
    except Exception:  # noqa: BLE001 - a fingerprint must never fail a run
        version = None
    return None if version is None else f"{version // 1000}.{version % 1000 // 10}"


def _nvml_facts() -> dict[str, Any] | None:
    """Clocks, power and throttle reasons per GPU through NVML, when nvidia-ml-py is installed."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: nothing to add
        return None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append(
                {
                    "index": i,
                    "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                    "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                    "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
                    "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
                    "throttle_reasons": int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h))
                    if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
                    else int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
                }
            )
        return {"driver": pynvml.nvmlSystemGetDriverVersion(), "gpus": gpus}
    except Exception:  # noqa: BLE001
        return None
    finally:
        pynvml.nvmlShutdown()


def collect(root: Path | None = None) -> dict[str, Any]:
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
    fingerprint.update(_torch_facts())
    nvml = _nvml_facts()
    if nvml is not None:
        fingerprint["nvml"] = nvml
    if root is not None:
        fingerprint["git"] = git_state(root)
    return fingerprint
