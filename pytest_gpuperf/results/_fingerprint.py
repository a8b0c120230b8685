"""Environment fingerprint, and the rule for which fingerprints may be compared.

Collected once per session and stored with every run. NVML (``pip install
nvidia-ml-py``) adds clocks, power and throttle reasons on NVIDIA machines; without
it those keys are absent.

The comparability rule. Two runs are compared only when they agree on the keys of
``MUST_MATCH``: the hardware (CPU model and count, architecture, GPU models with their
capability and memory) and the software that decides which kernels run (torch major.minor,
its CUDA or ROCm major.minor, the Python implementation). Everything else is shown
next to the verdicts but does not stop a comparison: host name (identical machines
in a CI fleet compare), Python version, torch patch release, cuDNN, driver, kernel,
thread defaults, git commit, and NVML clocks, power and throttling. Per record,
the gate also requires the same device, thread count, parameters and work per
call. ``--gpuperf-allow-mismatch=KEY,...`` (or ``all``) overrides the rule for those keys.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._git import git_state
from ..measuring import cpu_model

__all__ = [
    "MUST_MATCH",
    "RECORD_KEYS",
    "SHOWN",
    "THROTTLE_REASONS",
    "Difference",
    "Incomparable",
    "blocking_differences",
    "check_comparable",
    "collect",
    "differences",
    "matching_view",
    "parse_mismatch_keys",
    "throttle_names",
]

#: Keys two runs must agree on, with what each one means.
MUST_MATCH: Final[dict[str, str]] = {
    "machine": "CPU architecture",
    "cpu_model": "CPU model",
    "cpu_count": "number of CPUs",
    "gpus": "GPU models (capability, memory)",
    "torch_minor": "torch major.minor version",
    "cuda": "CUDA version torch was built with",
    "hip": "ROCm version torch was built with",
    "implementation": "Python implementation",
}

#: Keys shown when they differ, never blocking.
SHOWN: Final[dict[str, str]] = {
    "hostname": "host",
    "python": "Python",
    "torch": "torch",
    "cudnn": "cuDNN",
    "cuda_driver": "CUDA driver",
    "nvml_driver": "NVIDIA driver",
    "platform": "OS",
    "threads": "torch threads",
    "commit": "git commit",
    "dirty": "uncommitted changes",
}

#: Per-record keys that the gate requires to match; also accepted by ``--gpuperf-allow-mismatch``.
RECORD_KEYS: Final[dict[str, str]] = {
    "device_name": "device model of the record",
    "threads": "CPU threads while measuring",
    "params": "test parameters (sizes, dtype ...)",
    "work": "work per call (FLOP, bytes ...)",
}

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


# ---------------------------------------------------------------- collecting


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


# ---------------------------------------------------------------- the rule


@dataclass(frozen=True)
class Difference:
    key: str
    what: str
    base: Any
    head: Any
    blocking: bool

    def __str__(self) -> str:
        return f"{self.what} {_show(self.base)} -> {_show(self.head)}"


def _show(value: Any) -> str:
    if value is None or value == "" or value == ():
        return "(none)"
    if isinstance(value, (tuple, list)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _minor(version: Any) -> str | None:
    if not version:
        return None
    parts = str(version).split("+", 1)[0].split(".")
    return ".".join(parts[:2])


def _gpus(fingerprint: Mapping[str, Any]) -> tuple[str, ...]:
    devices = fingerprint.get("cuda_devices") or []
    out = []
    for d in devices:
        if isinstance(d, Mapping):
            memory = int(d.get("memory_bytes", 0)) / 2**30
            out.append(f"{d.get('name', '?')} (sm {d.get('capability', '?')}, {memory:.0f} GiB)")
    return tuple(out)


def matching_view(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint reduced to the keys of MUST_MATCH and SHOWN, in comparable form."""
    git = fingerprint.get("git") if isinstance(fingerprint.get("git"), Mapping) else {}
    nvml = fingerprint.get("nvml") if isinstance(fingerprint.get("nvml"), Mapping) else {}
    assert isinstance(git, Mapping) and isinstance(nvml, Mapping)
    return {
        "machine": fingerprint.get("machine"),
        "cpu_model": fingerprint.get("cpu_model"),
        "cpu_count": fingerprint.get("cpu_count"),
        "gpus": _gpus(fingerprint),
        "torch_minor": _minor(fingerprint.get("torch")),
        "cuda": _minor(fingerprint.get("torch_cuda")),
        "hip": _minor(fingerprint.get("torch_hip")),
        "implementation": fingerprint.get("implementation"),
        "hostname": fingerprint.get("hostname"),
        "python": fingerprint.get("python"),
        "torch": fingerprint.get("torch"),
        "cudnn": fingerprint.get("cudnn"),
        "cuda_driver": fingerprint.get("cuda_driver"),
        "nvml_driver": nvml.get("driver"),
        "platform": fingerprint.get("platform"),
        "threads": fingerprint.get("threads"),
        "commit": str(git.get("commit", ""))[:10] or None,
        "dirty": git.get("dirty"),
    }


def differences(base: Mapping[str, Any], head: Mapping[str, Any], allow: Collection[str] = ()) -> list[Difference]:
    """Every MUST_MATCH and SHOWN key on which the two fingerprints differ; ``allow``ed keys do not block."""
    a, b = matching_view(base), matching_view(head)
    out = []
    for key, what in {**MUST_MATCH, **SHOWN}.items():
        if a[key] != b[key]:
            blocking = key in MUST_MATCH and key not in allow and "all" not in allow
            out.append(Difference(key, what, a[key], b[key], blocking))
    return out


def parse_mismatch_keys(raw: str) -> tuple[str, ...]:
    """Fingerprint or record keys whose differences may be compared across, or ``all``; ValueError names a bad one."""
    known = [*MUST_MATCH, *RECORD_KEYS]
    out: list[str] = []
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        if part != "all" and part not in known:
            raise ValueError(f"{part!r} is not a fingerprint key; use all or a comma list of {', '.join(known)}")
        out.append(part)
    return tuple(out)


def blocking_differences(
    bases: Iterable[Mapping[str, Any]], heads: Iterable[Mapping[str, Any]], allow: Collection[str] = ()
) -> list[Difference]:
    """Every distinct blocking difference between any base and any head fingerprint (the one comparability check)."""
    heads = list(heads)
    out: list[Difference] = []
    for base in bases:
        for head in heads:
            for diff in differences(base, head, allow):
                if diff.blocking and str(diff) not in (str(d) for d in out):
                    out.append(diff)
    return out


class Incomparable(Exception):
    """Runs measured on other hardware or software: ``what`` says how they differ, ``keys`` what to allow."""

    def __init__(self, diffs: list[Difference]) -> None:
        self.what = "; ".join(str(d) for d in diffs)
        self.keys = ",".join(dict.fromkeys(d.key for d in diffs))
        super().__init__(self.what)


def check_comparable(
    bases: Iterable[Mapping[str, Any]], heads: Iterable[Mapping[str, Any]], allow: Collection[str] = ()
) -> None:
    """Raise Incomparable when a blocking difference separates the fingerprints; the caller words the refusal."""
    diffs = blocking_differences(bases, heads, allow)
    if diffs:
        raise Incomparable(diffs)
