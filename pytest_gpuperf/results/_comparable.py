"""The comparability rule: which fingerprint differences refuse a comparison, and which are only shown.

Two runs are compared only when they agree on the keys of ``MUST_MATCH``: the hardware
(CPU model and count, architecture, GPU models with their capability and memory, and
the GPUs' MIG mode) and the software that decides which kernels run (torch major.minor,
its CUDA or ROCm major.minor, the Python implementation, torch's precision flags). The
keys of ``SHOWN`` are listed under the verdicts when they differ but do not stop a
comparison: host name (identical machines in a CI fleet compare), Python version, torch
patch release, cuDNN, the CUDA and NVIDIA drivers, the OS, thread defaults, the git
commit, the GPUs' maximum SM clock and throttle reasons (but idle and the power cap, the
GPU's normal states) when the fingerprint was taken,
and the allocator and NCCL environment variables. The keys of ``RECORDED_SINCE`` are
compared only when both fingerprints hold them: pytest-benchmark's files and machines without
NVML lack them, and a fact one side did not record is no difference. Per record, the gate
also requires the same device, thread count, timing mode, parameters, work per call and kind of sample
(``RECORD_KEYS``); a device model, thread count or work per call that the baseline's tool did not record
(pytest-benchmark records none of them) is no difference. ``--gpuperf-allow-mismatch=KEY,...``
(or ``all``) overrides the rule for those keys. ``check_comparable`` is the one check every
route makes before comparing. Each function takes a ``Fingerprint`` (``Run.fingerprint``) or its
stored dict, and reads it through the typed view; keys a ``pytest_gpuperf_fingerprint`` hook
added (``Fingerprint.extra``) take no part.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._fingerprint import Fingerprint, GitState, NvmlGpu

__all__ = [
    "MUST_MATCH",
    "RECORD_KEYS",
    "Difference",
    "Incomparable",
    "blocking_differences",
    "check_comparable",
    "differences",
    "matching_view",
    "parse_mismatch_keys",
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
    "mig": "GPU MIG mode",
    "precision": "torch precision flags",
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
    "max_sm_clock": "max SM clock (MHz)",
    "throttle_reasons": "GPU throttle reasons",
    "env": "environment",
}

#: Keys compared only when both fingerprints record them (pytest-benchmark's files do not; NVML's need nvidia-ml-py).
RECORDED_SINCE: Final = frozenset({"mig", "precision", "max_sm_clock", "throttle_reasons", "env"})

#: Per-record keys that the gate requires to match; also accepted by ``--gpuperf-allow-mismatch``.
RECORD_KEYS: Final[dict[str, str]] = {
    "device_name": "device model of the record",
    "threads": "CPU threads while measuring",
    "mode": "timing mode (warm, cold, graph)",
    "params": "test parameters (sizes, dtype ...)",
    "work": "work per call (FLOP, bytes ...)",
    "sample": "what a sample times (the host clock; on CUDA the loop's time, or one call from call to result)",
}


@dataclass(frozen=True)
class Difference:
    key: str
    what: str
    base: Any
    head: Any
    blocking: bool

    def __str__(self) -> str:
        if isinstance(self.base, bool) or isinstance(self.head, bool):  # a phrase, never Python's True or False
            words = _BOOLEAN_WORDS.get(self.key, ("no", "yes"))
            base, head = (("unknown" if v is None else words[bool(v)]) for v in (self.base, self.head))
            return f"{self.what}: {base} -> {head}"
        return f"{self.what} {_show(self.base)} -> {_show(self.head)}"


#: How a difference of a yes-or-no key reads (False, True): "uncommitted changes: none -> some".
_BOOLEAN_WORDS: Final = {"dirty": ("none", "some")}


def _show(value: Any) -> str:
    if value is None or value == "" or value == ():
        return "(none)"
    if isinstance(value, (tuple, list)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _minor(version: str | None) -> str | None:
    if not version:
        return None
    parts = version.split("+", 1)[0].split(".")
    return ".".join(parts[:2])


def _gpus(fingerprint: Fingerprint) -> tuple[str, ...]:
    out = []
    for d in fingerprint.cuda_devices or ():
        memory = (d.memory_bytes or 0) / 2**30
        out.append(f"{_known(d.name)} (sm {_known(d.capability)}, {memory:.0f} GiB)")
    return tuple(out)


def _known(value: str | None) -> str:
    return "?" if value is None else value


def _mig(fingerprint: Fingerprint) -> tuple[str, ...] | None:
    """Each CUDA device's MIG mode (``on``, ``off``, ``?``); None when no device's mode was recorded."""
    modes = [d.mig_mode for d in fingerprint.cuda_devices or ()]
    if all(mode is None for mode in modes):
        return None
    return tuple("?" if mode is None else "on" if mode else "off" for mode in modes)


def _nvml_of_cuda(fingerprint: Fingerprint) -> list[NvmlGpu] | None:
    """The NVML entries of the CUDA devices, in CUDA's order; None when none is known to be a CUDA device."""
    gpus = fingerprint.nvml.gpus if fingerprint.nvml is not None else None
    matched = [g for g in gpus or () if g.cuda_index is not None]
    return sorted(matched, key=lambda g: g.cuda_index or 0) or None


def _max_sm_clock(fingerprint: Fingerprint) -> tuple[int | None, ...] | None:
    gpus = _nvml_of_cuda(fingerprint)
    return None if gpus is None else tuple(g.max_sm_clock_mhz for g in gpus)


#: Reasons that are a GPU's normal state, not a throttle: idle, and the power cap a heavy kernel runs under.
#: Clock settings (``applications_clocks_setting``, locked clocks) are normal too, but one a person made: a
#: change of them between runs is shown.
_STATES: Final = frozenset({"gpu_idle", "sw_power_cap"})


def _throttle_reasons(fingerprint: Fingerprint) -> tuple[str, ...] | None:
    """Each CUDA device's throttle reasons when the fingerprint was taken, but its normal states (``_STATES``)."""
    gpus = _nvml_of_cuda(fingerprint)
    if gpus is None:
        return None
    reasons = ([r for r in g.throttle_reasons or () if r not in _STATES] for g in gpus)
    return tuple("+".join(r) or "none" for r in reasons)


def _flags(flags: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A recorded mapping of names to values (unreadable ones, None, left out); None when not recorded."""
    if flags is None:
        return None
    return {name: value for name, value in flags.items() if value is not None}


def matching_view(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint (a Fingerprint, or its stored form) reduced to the keys of MUST_MATCH and SHOWN, in
    comparable form (None: not recorded)."""
    fp = Fingerprint.of(fingerprint)
    git = fp.git if fp.git is not None else GitState()
    return {
        "machine": fp.machine,
        "cpu_model": fp.cpu_model,
        "cpu_count": fp.cpu_count,
        "gpus": _gpus(fp),
        "torch_minor": _minor(fp.torch),
        "cuda": _minor(fp.torch_cuda),
        "hip": _minor(fp.torch_hip),
        "implementation": fp.implementation,
        "mig": _mig(fp),
        "precision": _flags(fp.precision),
        "hostname": fp.hostname,
        "python": fp.python,
        "torch": fp.torch,
        "cudnn": fp.cudnn,
        "cuda_driver": fp.cuda_driver,
        "nvml_driver": fp.nvml.driver if fp.nvml is not None else None,
        "platform": fp.platform,
        "threads": fp.threads,
        "commit": (git.commit or "")[:10] or None,
        "dirty": git.dirty,
        "max_sm_clock": _max_sm_clock(fp),
        "throttle_reasons": _throttle_reasons(fp),
        "env": _flags(fp.env),
    }


def _os(fingerprint: Mapping[str, Any]) -> str | None:
    """The OS as ``system-release``, or None where the fingerprint does not record them (no
    ``platform_info``). A pytest-benchmark file records no more than that, where ``platform`` is all of
    ``platform.platform()`` (with the machine and libc): two fingerprints that both record them are compared by it,
    so that a pytest-benchmark file and a run of this machine show no OS difference."""
    info = Fingerprint.of(fingerprint).platform_info or {}
    return f"{info['system']}-{info['release']}" if info.get("system") and info.get("release") else None


def _mapping_change(
    base: Mapping[str, Any], head: Mapping[str, Any], *, common_only: bool
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The entries that differ, as ``name=value`` on each side; None when none does. ``common_only``: names
    recorded on one side only are no difference (precision flags another torch version lacks)."""
    names = [n for n in dict.fromkeys([*base, *head]) if not common_only or (n in base and n in head)]
    changed = [n for n in names if base.get(n) != head.get(n)]
    if not changed:
        return None
    return (
        tuple(f"{n}={base[n]}" for n in changed if n in base),
        tuple(f"{n}={head[n]}" for n in changed if n in head),
    )


def differences(base: Mapping[str, Any], head: Mapping[str, Any], allow: Collection[str] = ()) -> list[Difference]:
    """Every MUST_MATCH and SHOWN key on which the two fingerprints differ; ``allow``ed keys do not block."""
    a, b = matching_view(base), matching_view(head)
    if _os(base) and _os(head):
        a["platform"], b["platform"] = _os(base), _os(head)
    out = []
    for key, what in {**MUST_MATCH, **SHOWN}.items():
        old, new = a[key], b[key]
        if key in RECORDED_SINCE and (old is None or new is None):
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            change = _mapping_change(old, new, common_only=key == "precision")
            if change is None:
                continue
            old, new = change
        elif old == new:
            continue
        blocking = key in MUST_MATCH and key not in allow and "all" not in allow
        out.append(Difference(key, what, old, new, blocking))
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
