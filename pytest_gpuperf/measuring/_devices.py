"""Which devices a run is for: parse ``--gpuperf-device``, ask torch what exists, resolve slots.

``--gpuperf-device`` accepts ``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``auto`` (cuda if
available, else mps, else cpu), ``all`` (every device present) and comma lists of
those. Requested devices that are absent stay in the list, marked unavailable with
the reason, so their tests can be skipped (or refused) with that reason.

``open_device`` is the one way from a device string to a ready Backend
(``_backends.py``): ``measure()``, ``ab`` and the asv benchmarks all go through it.

A process that shares the machine with others of its run (an xdist worker, a torchrun
rank) is bound to one GPU (``Binding``), and ``bind`` is the one rule for where a
requested device is measured in it: ``cuda`` on the process's own GPU, an explicit
``cuda:N`` where it says or refused with the reason, never moved.
"""

from __future__ import annotations

import functools
import platform
import re
import sys
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from ._backends import Backend

__all__ = [
    "BIND_ENV",
    "KINDS",
    "Binding",
    "DeviceError",
    "DeviceSlot",
    "Inventory",
    "bind",
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


#: What a device option takes, told with each refusal: a list (``--gpuperf-device``), or one device (``ab``,
#: ``measure()``), which must not be told of lists it would then refuse.
_FORMS: Final = "use cpu, cuda, cuda:N, mps, auto, all or a comma list such as cpu,cuda"
_ONE_FORM: Final = "use one device: cpu, cuda, cuda:N, mps or auto"


def parse_device_option(text: str, *, one: bool = False) -> tuple[str, ...]:
    """Split and validate ``"cpu,cuda:1"``; raise DeviceError naming the bad token and the accepted forms (those
    of one device where ``one``)."""
    forms = _ONE_FORM if one else _FORMS
    tokens = tuple(t.strip() for t in text.split(","))
    if not text.strip():
        raise DeviceError(f"{text!r} is empty; {forms}")
    if any(not t for t in tokens):
        raise DeviceError(f"{text!r} has an empty item; {forms}")
    for token in tokens:
        if _TOKEN.match(token) is None:
            hint = ""
            if token.lower() in ("gpu", "nvidia"):
                hint = " (for an NVIDIA GPU write cuda or cuda:N)"
            elif token.startswith("cuda:"):
                hint = " (the index after cuda: is a whole number, as in cuda:0)"
            elif _TOKEN.match(token.lower()) is not None:
                hint = f" (device names are lowercase: write {token.lower()})"
            raise DeviceError(f"{token!r} is not a device{hint}; {forms}")
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
    #: the index was named (``cuda:1``), not chosen (``cuda``, ``auto``, ``all``): it is never moved to another GPU
    pinned: bool = False

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
        pinned = index is not None
        if inventory.cuda_count == 0:
            why = f"{asked} was requested but {inventory.cuda_reason}; devices here: {present}"
            return DeviceSlot(asked if index is not None else "cuda", "cuda", index, False, why, pinned)
        i = 0 if index is None else index
        if i >= inventory.cuda_count:
            count = inventory.cuda_count
            why = f"{asked} was requested but this machine has {count} CUDA device(s); devices here: {present}"
            return DeviceSlot(f"cuda:{i}", "cuda", i, False, why, pinned)
        return DeviceSlot(f"cuda:{i}", "cuda", i, True, pinned=pinned)

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


# ---------------------------------------------------------------- one GPU per process

#: Set by a confirmation run (``gate``) in the environment of the fresh pytest it starts: the GPU (``cuda:N``) the
#: records it measures again were measured on, so that it measures there too.
BIND_ENV: Final = "GPUPERF_BIND_DEVICE"


@dataclass(frozen=True)
class Binding:
    """The one GPU this process measures on: an xdist worker's or a torchrun rank's, when the run has other
    processes on this machine measuring on theirs at the same time, or a confirmation run's (``BIND_ENV``)."""

    #: the process's GPU, ``cuda:<index>``
    index: int
    #: what bound it: an xdist worker, a torchrun rank, a confirmation run
    by: Literal["xdist", "torchrun", "confirmation"]
    #: processes of the run measuring at once on this machine, this one included (1 for a confirmation run)
    processes: int

    @property
    def who(self) -> str:
        """This process, as a message names it."""
        if self.by == "xdist":
            return f"xdist worker gw{self.index}"
        if self.by == "torchrun":
            return f"torchrun's LOCAL_RANK={self.index}"
        return "this confirmation run"

    @property
    def shared(self) -> bool:
        """Do other processes of the run measure on this machine's other GPUs at the same time?"""
        return self.processes > 1

    def pinned_refusal(self, slot: DeviceSlot) -> str:
        """Why ``slot``, an explicit ``cuda:N``, cannot be measured on by every process of this run."""
        if self.by == "xdist":
            processes, moved, fix = f"-n {self.processes} runs {self.processes} workers", "worker", "worker gwN"
            also = ", or run without -n"
        else:
            processes, moved, also = f"torchrun started {self.processes} local ranks", "rank", ""
            fix = "the rank with LOCAL_RANK=N"
        return (
            f"--gpuperf-device={slot.id} names one GPU, and {processes}: they would all measure on {slot.id} at once "
            f"(no {moved} is moved off the GPU named); name the kind alone, --gpuperf-device=cuda ({fix} then "
            f"measures on cuda:N){also}"
        )

    def multi_gpu_refusal(self, count: int) -> str:
        """Why a test that uses ``count`` GPUs at once does not run in this process ('' when it may)."""
        if not self.shared:
            return ""
        if self.by == "xdist":
            who, others, fix = self.who, "workers", "run it without -n"
        else:
            who, others, fix = f"the torchrun rank with LOCAL_RANK={self.index}", "ranks", "run it without torchrun"
        where = f"measures on one (cuda:{self.index}) while the other {others} measure on theirs"
        return f"uses {count} GPUs at once, and {who} {where}; {fix}"


def bind(slot: DeviceSlot, binding: Binding | None, inventory: Inventory | None) -> DeviceSlot:
    """The device a test parametrized on ``slot`` measures on in a process with ``binding``.

    ``cuda`` (``auto``, ``all``) is the process's own GPU, ``cuda:<binding.index>``; an explicit
    ``cuda:N`` is measured on as named, or refused (DeviceError with the reason and the fix) where
    other processes of the run would measure on it too. Test ids keep the requested device.
    """
    if binding is None or slot.kind != "cuda" or not slot.available:
        return slot
    if slot.pinned:
        if binding.shared:
            raise DeviceError(binding.pinned_refusal(slot))
        return slot
    gpus = inventory.cuda_count if inventory is not None else 0
    if binding.index >= gpus:
        fix = {
            "torchrun": f"run torchrun with --nproc-per-node at most {gpus}",
            "xdist": f"run -n at most {gpus}",
        }.get(binding.by, "measure it again on a machine that has that GPU")
        raise DeviceError(f"{binding.who} measures on cuda:{binding.index}, and this machine has {gpus} GPUs; {fix}")
    return DeviceSlot(f"cuda:{binding.index}", "cuda", binding.index, True)


def resolve_slots(text: str, torch_module: Any = None, *, one: bool = False) -> list[DeviceSlot]:
    """The slots a device string names on this machine (absent ones included, with the reason); a refusal tells
    the forms of one device where ``one``."""
    return resolve_devices(parse_device_option(text, one=one), probe_inventory(torch_module))


def open_device(text: str, torch_module: Any = None) -> tuple[DeviceSlot, Backend]:
    """One present device and its Backend; DeviceError says what is wrong with ``text`` and the fix."""
    from ._backends import backend_for

    slots = resolve_slots(text, torch_module, one=True)
    if len(slots) != 1:
        names = ", ".join(slot.id for slot in slots)
        raise DeviceError(f"{text!r} names {len(slots)} devices ({names}); name one, for example cpu or cuda:0")
    slot = slots[0]
    if not slot.available:
        raise DeviceError(f"{slot.reason}; choose a device this machine has")
    return slot, backend_for(slot, torch_module)


def torch_of(module: Any) -> Any:
    """``module``, else torch: the measuring core's one import of it.

    torch's own import warnings are shown, never raised: without numpy, importing torch warns "Failed to
    initialize NumPy", and under ``-W error`` that warning became the collection error of every test that asks
    for our fixtures (and stopped the session) though the user's code never imported torch. The filter is
    ``default`` for the import alone (pytest still lists the warning in its summary); after it, the user's
    filters hold.
    """
    if module is not None:
        return module
    torch = sys.modules.get("torch")
    if torch is None:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            import torch
    return torch


@functools.cache
def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, else platform.processor(); read once a process (every
    measurement on a CPU names it)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
