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

``collect`` returns the stored form, a plain dict: the ``pytest_gpuperf_fingerprint`` hook adds
keys to it in place before it is frozen. Every reader reads it through ``Fingerprint``, its
frozen typed view: each key the tool writes is a typed field (``None``: not recorded, as in
files older than the key), the keys it does not know are kept in ``extra``, and ``to_dict``
writes back the same JSON, key order and ``null``s included, so reading a file and writing it
again changes no byte.
"""

from __future__ import annotations

import copy
import os
import platform
import socket
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final, TypeVar

from .._git import git_state
from ..measuring import cpu_model, import_nvml, match_nvml_device, nvml_field, optional, read_clocks, throttle_names

__all__ = ["PRECISION_FLAGS", "CudaDevice", "Fingerprint", "GitState", "Nvml", "NvmlGpu", "collect"]

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
    return {
        "index": index,
        "name": str(props.name),
        "capability": f"{props.major}.{props.minor}",
        "memory_bytes": int(props.total_memory),
        "multiprocessors": int(getattr(props, "multi_processor_count", 0)),
        # CUDA's form, without NVML's "GPU-" prefix
        "uuid": optional(getattr(props, "uuid", None), str),
    }


def _cuda_driver(torch: Any) -> str | None:
    """The CUDA driver API version (``12.4``); torch has no public call for it, hence the guarded private one."""
    query = getattr(torch._C, "_cuda_getDriverVersion", None)
    try:
        version = int(query()) if query is not None else None
    except Exception:  # noqa: BLE001 - a fingerprint must never fail a run
        version = None
    return None if not version else f"{version // 1000}.{version % 1000 // 10}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_gpu(pynvml: Any, index: int) -> dict[str, Any]:
    """One GPU's facts, each read on its own: a call this GPU does not support (power on a vGPU, a MIG
    instance's clocks) leaves that fact None and keeps the rest."""
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    reading = read_clocks(pynvml, h)
    return {
        "index": index,
        "name": nvml_field(lambda: pynvml.nvmlDeviceGetName(h), _text),
        "uuid": nvml_field(lambda: pynvml.nvmlDeviceGetUUID(h), _text),
        "cuda_index": None,
        # MIG's current mode (not the pending one); None where the GPU has no MIG or NVML cannot say
        "mig_mode": nvml_field(lambda: pynvml.nvmlDeviceGetMigMode(h)[0], bool),
        "sm_clock_mhz": reading.sm_clock_mhz,
        "mem_clock_mhz": reading.mem_clock_mhz,
        "max_sm_clock_mhz": nvml_field(lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM), int),
        "power_w": reading.power_w,
        "power_limit_w": nvml_field(lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h), lambda mw: float(mw) / 1000.0),
        "temperature_c": reading.temperature_c,
        "throttle_reasons": None if reading.reasons is None else throttle_names(reading.reasons),
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


def platform_info() -> dict[str, str]:
    """The ``platform`` facts pytest-benchmark's ``machine_info`` holds and the rest of the fingerprint does not (its
    ``platform`` is ``platform.platform()``, which joins more), so that an export writes them as pytest-benchmark
    does on this machine and the OS compares as ``system-release`` with a file pytest-benchmark wrote."""
    return {
        "system": platform.system(),
        "release": platform.release(),
        "processor": platform.processor(),
        "python_compiler": platform.python_compiler(),
    }


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
        "platform_info": platform_info(),
    }
    torch = torch_module if torch_module is not None else __import__("torch")
    fingerprint.update(_torch_facts(torch))
    nvml = _nvml_facts(nvml_module, torch, fingerprint.get("cuda_devices"))
    if nvml is not None:
        fingerprint["nvml"] = nvml
    if root is not None:
        fingerprint["git"] = git_state(root)
    return fingerprint


# ---------------------------------------------------------------- the typed view


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Kind:
    """How the stored JSON value of one key is told to be of its type, read as its typed value, and written back."""

    accepts: Callable[[Any], bool]
    read: Callable[[Any], Any] = _as_is
    write: Callable[[Any], Any] = _as_is


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_mapping_of(value: Any, accepts: Callable[[Any], bool]) -> bool:
    return isinstance(value, Mapping) and all(isinstance(k, str) and accepts(v) for k, v in value.items())


def _is_list_of(value: Any, accepts: Callable[[Any], bool]) -> bool:
    return isinstance(value, (list, tuple)) and all(accepts(v) for v in value)


_TEXT: Final = _Kind(lambda v: isinstance(v, str))
_INT: Final = _Kind(_is_int)
#: An int stays an int: written back as it was read (``612``, not ``612.0``).
_NUMBER: Final = _Kind(lambda v: _is_int(v) or isinstance(v, float))
_BOOL: Final = _Kind(lambda v: isinstance(v, bool))
_TEXTS: Final = _Kind(lambda v: _is_list_of(v, lambda x: isinstance(x, str)), tuple, list)
_ENV: Final = _Kind(lambda v: _is_mapping_of(v, lambda x: isinstance(x, str)), dict, dict)
_FLAGS: Final = _Kind(lambda v: _is_mapping_of(v, lambda x: x is None or isinstance(x, (bool, str))), dict, dict)

_P = TypeVar("_P", bound="_Part")


def _part(cls: type[_Part]) -> _Kind:
    return _Kind(lambda v: isinstance(v, Mapping), cls.from_dict, lambda part: part.to_dict())


def _parts(cls: type[_Part]) -> _Kind:
    return _Kind(
        lambda v: _is_list_of(v, lambda x: isinstance(x, Mapping)),
        lambda v: tuple(cls.from_dict(x) for x in v),
        lambda parts: [part.to_dict() for part in parts],
    )


def _key(kind: _Kind) -> Any:
    """A stored key: a typed field, None when the key is absent (or null, or not of its type)."""
    return field(default=None, metadata={"kind": kind})


def _kinds(cls: type[_Part]) -> dict[str, _Kind]:
    """The stored keys of ``cls``, in the order a fingerprint built in code writes them."""
    return {f.name: f.metadata["kind"] for f in fields(cls) if "kind" in f.metadata}


@dataclass(frozen=True, kw_only=True)
class _Part:
    """A mapping of the stored form as typed fields, one per key (the field's name), read and written back as is.

    A key the fields do not hold (a key a hook added, or a known key whose value is not of its type) is kept in
    ``extra`` as written, and the known one reads as not recorded. ``layout``, the stored keys in their order,
    lets ``to_dict`` write a value read from a file back byte for byte: a ``null`` stays, an absent key stays
    absent. A part built in code has none: it writes its fields that are not None, then ``extra``.
    """

    #: Stored keys the typed fields do not hold, with their values as stored.
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The stored keys in their stored order (empty: built in code).
    layout: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_dict(cls: type[_P], data: Mapping[str, Any]) -> _P:
        kinds = _kinds(cls)
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            kind = kinds.get(key)
            if kind is not None and (value is None or kind.accepts(value)):
                values[key] = optional(value, kind.read)
            else:
                extra[key] = copy.deepcopy(value)
        return cls(**values, extra=extra, layout=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        kinds = _kinds(type(self))
        added = [key for key in kinds if getattr(self, key) is not None]
        out: dict[str, Any] = {}
        for key in dict.fromkeys([*self.layout, *added, *self.extra]):
            kind = kinds.get(key)
            value = None if kind is None else getattr(self, key)
            if kind is not None and value is not None:
                out[key] = kind.write(value)
            elif key in self.extra:
                out[key] = copy.deepcopy(self.extra[key])
            elif kind is not None:
                out[key] = None  # stored as null
        return out


@dataclass(frozen=True, kw_only=True)
class GitState(_Part):
    """The git state of the work tree (``_git.git_state``): empty outside git."""

    commit: str | None = _key(_TEXT)
    branch: str | None = _key(_TEXT)
    dirty: bool | None = _key(_BOOL)
    #: A hash of the uncommitted diff (dirty trees only): two dirty runs are the same code only if it matches.
    diff_sha: str | None = _key(_TEXT)


@dataclass(frozen=True, kw_only=True)
class CudaDevice(_Part):
    """One CUDA device as torch sees it, and (with NVML) which NVML device it is."""

    index: int | None = _key(_INT)
    name: str | None = _key(_TEXT)
    #: Compute capability, ``"9.0"``.
    capability: str | None = _key(_TEXT)
    memory_bytes: int | None = _key(_INT)
    multiprocessors: int | None = _key(_INT)
    #: CUDA's form, without NVML's ``GPU-`` prefix.
    uuid: str | None = _key(_TEXT)
    #: ``uuid``, ``pci bus id`` or ``unmatched``.
    nvml_match: str | None = _key(_TEXT)
    nvml_index: int | None = _key(_INT)
    mig_mode: bool | None = _key(_BOOL)


@dataclass(frozen=True, kw_only=True)
class NvmlGpu(_Part):
    """One GPU as NVML saw it when the fingerprint was taken."""

    index: int | None = _key(_INT)
    name: str | None = _key(_TEXT)
    uuid: str | None = _key(_TEXT)
    #: Its CUDA device index in this process (None: not visible to it).
    cuda_index: int | None = _key(_INT)
    mig_mode: bool | None = _key(_BOOL)
    sm_clock_mhz: int | None = _key(_INT)
    mem_clock_mhz: int | None = _key(_INT)
    max_sm_clock_mhz: int | None = _key(_INT)
    power_w: float | None = _key(_NUMBER)
    power_limit_w: float | None = _key(_NUMBER)
    temperature_c: int | None = _key(_INT)
    throttle_reasons: tuple[str, ...] | None = _key(_TEXTS)


@dataclass(frozen=True, kw_only=True)
class Nvml(_Part):
    """What NVML said: the driver and every GPU (not only the visible ones)."""

    driver: str | None = _key(_TEXT)
    gpus: tuple[NvmlGpu, ...] | None = _key(_parts(NvmlGpu))


@dataclass(frozen=True, kw_only=True, eq=False)
class Fingerprint(_Part, Mapping[str, Any]):
    """The frozen typed view of a run's fingerprint: every reader reads it through its fields.

    None is "not recorded": files older than a key, machines without CUDA or NVML, a file another
    tool wrote. The stored form stays readable as a read-only mapping (``fp["torch"]``,
    ``dict(fp)``, equal to a dict of the same keys), as ``Run.fingerprint`` was before it was
    typed; keys added through the ``pytest_gpuperf_fingerprint`` hook are in ``extra``.
    """

    #: The tool that wrote the file when it was not pytest-gpuperf (``pytest-benchmark``).
    source: str | None = _key(_TEXT)
    python: str | None = _key(_TEXT)
    implementation: str | None = _key(_TEXT)
    platform: str | None = _key(_TEXT)
    machine: str | None = _key(_TEXT)
    hostname: str | None = _key(_TEXT)
    cpu_model: str | None = _key(_TEXT)
    cpu_count: int | None = _key(_INT)
    #: The allocator's and NCCL's environment variables that were set.
    env: Mapping[str, str] | None = _key(_ENV)
    torch: str | None = _key(_TEXT)
    torch_cuda: str | None = _key(_TEXT)
    cudnn: int | None = _key(_INT)
    threads: int | None = _key(_INT)
    interop_threads: int | None = _key(_INT)
    mkl: bool | None = _key(_BOOL)
    mkldnn: bool | None = _key(_BOOL)
    mps: bool | None = _key(_BOOL)
    #: torch's precision flags by name (``PRECISION_FLAGS``; None: this torch lacks the flag or refused to read it).
    precision: Mapping[str, bool | str | None] | None = _key(_FLAGS)
    torch_hip: str | None = _key(_TEXT)
    cuda_driver: str | None = _key(_TEXT)
    cuda_devices: tuple[CudaDevice, ...] | None = _key(_parts(CudaDevice))
    nvml: Nvml | None = _key(_part(Nvml))  # noqa: RUF009 - _key returns a field(), as dataclass defaults do
    git: GitState | None = _key(_part(GitState))  # noqa: RUF009 - as above
    #: ``platform_info()``: system, release, processor, python_compiler as pytest-benchmark's machine_info has them.
    platform_info: Mapping[str, str] | None = _key(_ENV)

    @classmethod
    def of(cls, fingerprint: Mapping[str, Any]) -> Fingerprint:
        """``fingerprint`` as the view: itself when it is one, else read from its stored form."""
        return fingerprint if isinstance(fingerprint, Fingerprint) else cls.from_dict(fingerprint)

    # The stored form, read-only.
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Fingerprint):
            return self.to_dict() == other.to_dict()
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a dict's: a fingerprint holds mappings
