"""Which devices a run is for: parse ``--gpuperf-device``, ask torch what exists, resolve slots.

``--gpuperf-device`` accepts ``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``auto`` (cuda if
available, else mps, else cpu), ``all`` (every device present) and comma lists of
those. Requested devices that are absent stay in the list, marked unavailable with
the reason, so their tests can be skipped (or refused) with that reason.

``open_device`` is the one way from a device string to a ready Backend
(``_backends.py``): ``measure()``, ``ab`` and the asv benchmarks all go through it.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._backends import Backend

__all__ = [
    "KINDS",
    "DeviceError",
    "DeviceSlot",
    "Inventory",
    "cpu_model",
    "open_device",
    "parse_device_option",
    "probe_inventory",
    "resolve_devices",
    "resolve_slots",
]

KINDS: Final = ("cpu", "cuda", "mps")
_TOKEN = re.compile(r"^(cpu|mps|auto|all|cuda(?::(\d+))?)$")


class DeviceError(ValueError):
    """A device option that cannot be understood."""


# ---------------------------------------------------------------- what was asked for


def parse_device_option(text: str) -> tuple[str, ...]:
    """Split and validate ``"cpu,cuda:1"``; raise DeviceError naming the bad token and the accepted forms."""
    tokens = tuple(t.strip() for t in text.split(","))
    if not text.strip() or any(not t for t in tokens):
        raise DeviceError(
            f"{text!r} is empty or has an empty item; "
            "use cpu, cuda, cuda:N, mps, auto, all or a comma list such as cpu,cuda"
        )
    for token in tokens:
        if _TOKEN.match(token) is None:
            hint = ""
            if token.lower() in ("gpu", "nvidia"):
                hint = " (for an NVIDIA GPU write cuda or cuda:N)"
            elif token.startswith("cuda:"):
                hint = " (the index after cuda: is a whole number, as in cuda:0)"
            elif _TOKEN.match(token.lower()) is not None:
                hint = f" (device names are lowercase: write {token.lower()})"
            raise DeviceError(
                f"{token!r} is not a device{hint}; "
                "use cpu, cuda, cuda:N, mps, auto, all or a comma list such as cpu,cuda"
            )
    return tokens


# ---------------------------------------------------------------- what this machine has


@dataclass(frozen=True)
class Inventory:
    """What torch can reach on this machine."""

    cuda_count: int
    cuda_reason: str
    mps_available: bool
    mps_reason: str

    def present(self) -> list[str]:
        ids = ["cpu"] + [f"cuda:{i}" for i in range(self.cuda_count)]
        if self.mps_available:
            ids.append("mps")
        return ids


def probe_inventory(torch_module: Any | None = None) -> Inventory:
    """Ask torch which devices exist; the reason strings say why a kind is absent."""
    torch = torch_of(torch_module)
    cuda = torch.cuda
    if cuda.is_available():
        count = int(cuda.device_count())
        cuda_reason = ""
    else:
        count = 0
        built = getattr(torch.version, "cuda", None)
        if built is None:
            cuda_reason = f"torch {torch.__version__} was built without CUDA"
        else:
            cuda_reason = f"torch {torch.__version__} (CUDA {built}) finds no CUDA device or driver"
    mps_backend = getattr(torch.backends, "mps", None)
    mps_ok = bool(mps_backend is not None and mps_backend.is_available())
    if mps_ok:
        mps_reason = ""
    elif mps_backend is not None and mps_backend.is_built():
        mps_reason = "MPS is built into torch but not available on this machine"
    else:
        mps_reason = "MPS needs Apple silicon and a torch built with MPS"
    return Inventory(count, cuda_reason, mps_ok, mps_reason)


@dataclass(frozen=True)
class DeviceSlot:
    """One device a test runs on: ``id`` is the test id part (``cpu``, ``cuda:0``)."""

    id: str
    kind: str
    index: int | None
    available: bool
    reason: str = ""

    def __str__(self) -> str:
        return self.id


def resolve_devices(tokens: tuple[str, ...], inventory: Inventory) -> list[DeviceSlot]:
    """Turn parsed tokens into device slots, in order, without duplicates."""
    present = ", ".join(inventory.present())
    slots: list[DeviceSlot] = []

    def add(slot: DeviceSlot) -> None:
        if all(s.id != slot.id for s in slots):
            slots.append(slot)

    def cuda_slot(index: int | None, asked: str) -> DeviceSlot:
        if inventory.cuda_count == 0:
            why = f"{asked} was requested but {inventory.cuda_reason}; devices here: {present}"
            return DeviceSlot(asked if index is not None else "cuda", "cuda", index, False, why)
        i = 0 if index is None else index
        if i >= inventory.cuda_count:
            count = inventory.cuda_count
            why = f"{asked} was requested but this machine has {count} CUDA device(s); devices here: {present}"
            return DeviceSlot(f"cuda:{i}", "cuda", i, False, why)
        return DeviceSlot(f"cuda:{i}", "cuda", i, True)

    def mps_slot() -> DeviceSlot:
        if inventory.mps_available:
            return DeviceSlot("mps", "mps", None, True)
        return DeviceSlot(
            "mps", "mps", None, False, f"mps was requested but {inventory.mps_reason}; devices here: {present}"
        )

    for token in tokens:
        if token == "cpu":
            add(DeviceSlot("cpu", "cpu", None, True))
        elif token == "mps":
            add(mps_slot())
        elif token == "auto":
            if inventory.cuda_count:
                add(cuda_slot(None, "cuda"))
            elif inventory.mps_available:
                add(mps_slot())
            else:
                add(DeviceSlot("cpu", "cpu", None, True))
        elif token == "all":
            for device_id in inventory.present():
                kind, _, idx = device_id.partition(":")
                add(DeviceSlot(device_id, kind, int(idx) if idx else None, True))
        else:
            _, _, idx = token.partition(":")
            add(cuda_slot(int(idx) if idx else None, token))
    return slots


def resolve_slots(text: str, torch_module: Any = None) -> list[DeviceSlot]:
    """The slots a device string names on this machine (absent ones included, with the reason)."""
    return resolve_devices(parse_device_option(text), probe_inventory(torch_module))


def open_device(text: str, torch_module: Any = None) -> tuple[DeviceSlot, Backend]:
    """One present device and its Backend; DeviceError says what is wrong with ``text`` and the fix."""
    from ._backends import backend_for

    slots = resolve_slots(text, torch_module)
    if len(slots) != 1:
        names = ", ".join(slot.id for slot in slots)
        raise DeviceError(f"{text!r} names {len(slots)} devices ({names}); name one, for example cpu or cuda:0")
    slot = slots[0]
    if not slot.available:
        raise DeviceError(f"{slot.reason}; choose a device this machine has")
    return slot, backend_for(slot, torch_module)


def torch_of(module: Any) -> Any:
    if module is not None:
        return module
    import torch

    return torch


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, else platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
