"""Environment fingerprint: everything a later comparison needs to know about the machine and software.

Collected once per session and stored with every run (its keys are part of the results
schema). Besides the hardware and versions it holds torch's precision flags (TF32,
cuDNN, the float32 matmul precision; ``precision``) and the environment variables that
change kernels or communication (``PYTORCH_CUDA_ALLOC_CONF``, ``PYTORCH_ALLOC_CONF``,
every ``NCCL_*``; ``env``), as they are when the fingerprint is taken. NVML
(``pip install nvidia-ml-py``) adds the driver and, per GPU, its UUID, MIG mode,
clocks, power and throttle reasons on NVIDIA machines; without it those keys are absent.
NVML devices are matched to CUDA devices by UUID, else PCI bus id (never by index,
which ``CUDA_VISIBLE_DEVICES`` shifts): each ``cuda_devices`` entry says which NVML
device it is (``nvml_index``, ``nvml_match``). Which differences block a comparison is
decided in ``_comparable.py``.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import warnings
from pathlib import Path
from typing import Any, Final

from .._git import git_state
from ..measuring import cpu_model, import_nvml, match_nvml_device, read_clocks, throttle_names

__all__ = ["PRECISION_FLAGS", "collect"]

#: The precision flags recorded, by key, as attribute paths under ``torch`` (a call for the matmul precision).
#: ``*fp32_precision`` exist from torch 2.9; a flag torch lacks or refuses to read is recorded as None.
PRECISION_FLAGS: Final[dict[str, str]] = {
    "cuda.matmul.allow_tf32": "backends.cuda.matmul.allow_tf32",
    "cuda.matmul.allow_fp16_reduced_precision_reduction": "backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "cuda.matmul.allow_bf16_reduced_precision_reduction": "backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "cudnn.allow_tf32": "backends.cudnn.allow_tf32",
    "cudnn.benchmark": "backends.cudnn.benchmark",
    "cudnn.deterministic": "backends.cudnn.deterministic",
    "float32_matmul_precision": "get_float32_matmul_precision()",
    "fp32_precision": "backends.fp32_precision",
    "cuda.matmul.fp32_precision": "backends.cuda.matmul.fp32_precision",
    "cudnn.fp32_precision": "backends.cudnn.fp32_precision",
    "cudnn.conv.fp32_precision": "backends.cudnn.conv.fp32_precision",
    "cudnn.rnn.fp32_precision": "backends.cudnn.rnn.fp32_precision",
}
#: Environment variables recorded when set, besides every ``NCCL_*``.
ENV_VARS: Final = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def _flag(torch: Any, path: str) -> bool | str | None:
    value: Any = torch
    try:
        for part in path.split("."):
            value = getattr(value, part[:-2])() if part.endswith("()") else getattr(value, part)
    except Exception:  # noqa: BLE001 - absent in this torch, or refused (torch 2.9 on mixed TF32 APIs)
        return None
    return value if isinstance(value, (bool, str)) else None


def _precision(torch: Any) -> dict[str, bool | str | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a deprecated flag is still recorded, without a warning per session
        return {key: _flag(torch, path) for key, path in PRECISION_FLAGS.items()}


def _env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k in ENV_VARS or k.startswith("NCCL_")}


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
        "precision": _precision(torch),
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
    uuid = getattr(props, "uuid", None)
    return {
        "index": index,
        "name": str(props.name),
        "capability": f"{props.major}.{props.minor}",
        "memory_bytes": int(props.total_memory),
        "multiprocessors": int(getattr(props, "multi_processor_count", 0)),
        # CUDA's form, without NVML's "GPU-" prefix
        "uuid": None if uuid is None else str(uuid),
    }


def _cuda_driver(torch: Any) -> str | None:
    """The CUDA driver API version (``12.4``); torch has no public call for it, hence the guarded private one."""
    query = getattr(torch._C, "_cuda_getDriverVersion", None)
    try:
        version = int(query()) if query is not None else None
    except Exception:  # noqa: BLE001 - a fingerprint must never fail a run
        version = None
    return None if not version else f"{version // 1000}.{version % 1000 // 10}"


def _mig_mode(pynvml: Any, handle: Any) -> bool | None:
    """Whether MIG is on (the current mode, not the pending one); None where the GPU has no MIG or NVML cannot say."""
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except Exception:  # noqa: BLE001 - not supported on this GPU or driver
        return None
    return bool(current)


def _nvml_gpu(pynvml: Any, index: int) -> dict[str, Any]:
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    reading = read_clocks(pynvml, h)
    name, uuid = pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetUUID(h)
    return {
        "index": index,
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "uuid": uuid.decode() if isinstance(uuid, bytes) else str(uuid),
        "cuda_index": None,
        "mig_mode": _mig_mode(pynvml, h),
        "sm_clock_mhz": reading.sm_clock_mhz,
        "mem_clock_mhz": reading.mem_clock_mhz,
        "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
        "power_w": reading.power_w,
        "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "temperature_c": reading.temperature_c,
        "throttle_reasons": throttle_names(reading.reasons),
    }


def _nvml_facts(
    module: Any = None, torch: Any = None, cuda_devices: list[dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """Driver, clocks, power and throttle reasons per GPU through NVML, when nvidia-ml-py is installed; each
    CUDA device in ``cuda_devices`` gains the NVML device it is (matched by UUID or PCI bus id) and its MIG mode."""
    pynvml = module if module is not None else import_nvml()
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: nothing to add
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = [_nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())]
        matches = [
            (device, match_nvml_device(pynvml, torch.cuda.get_device_properties(device["index"])))
            for device in cuda_devices or []
        ]
    except Exception:  # noqa: BLE001 - a fingerprint must never fail a run
        return None
    finally:
        pynvml.nvmlShutdown()
    for device, match in matches:
        device["nvml_match"] = "unmatched" if match is None else match.how
        device["nvml_index"] = None if match is None else match.index
        device["mig_mode"] = None if match is None else gpus[match.index]["mig_mode"]
        if match is not None:
            gpus[match.index]["cuda_index"] = device["index"]
    return {"driver": driver.decode() if isinstance(driver, bytes) else str(driver), "gpus": gpus}


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
        "env": _env(),
    }
    torch = torch_module if torch_module is not None else __import__("torch")
    fingerprint.update(_torch_facts(torch))
    nvml = _nvml_facts(nvml_module, torch, fingerprint.get("cuda_devices"))
    if nvml is not None:
        fingerprint["nvml"] = nvml
    if root is not None:
        fingerprint["git"] = git_state(root)
    return fingerprint
