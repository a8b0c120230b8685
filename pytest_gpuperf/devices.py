"""Which devices a run is for, and the thin device-specific part of timing: one Backend per kind.

``--gpuperf-device`` accepts ``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``auto`` (cuda if
available, else mps, else cpu), ``all`` (every device present) and comma lists of
those. Requested devices that are absent stay in the list, marked unavailable with
the reason, so their tests can be skipped (or refused) with that reason.

Everything torch-specific is reached through a module object passed in, so the
CUDA logic can be exercised here with a stand-in that records calls.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Final, Protocol, final

__all__ = [
    "Backend",
    "CpuBackend",
    "CudaBackend",
    "DeviceError",
    "DeviceSlot",
    "Inventory",
    "MemoryProbe",
    "MpsBackend",
    "backend_for",
    "parse_device_option",
    "probe_inventory",
    "resolve_devices",
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
    cuda_names: tuple[str, ...] = ()

    def present(self) -> list[str]:
        ids = ["cpu"] + [f"cuda:{i}" for i in range(self.cuda_count)]
        if self.mps_available:
            ids.append("mps")
        return ids


def probe_inventory(torch_module: Any | None = None) -> Inventory:
    """Ask torch which devices exist; the reason strings say why a kind is absent."""
    torch = _torch(torch_module)
    cuda = torch.cuda
    if cuda.is_available():
        count = int(cuda.device_count())
        names = tuple(str(cuda.get_device_name(i)) for i in range(count))
        cuda_reason = ""
    else:
        count, names = 0, ()
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
    return Inventory(count, cuda_reason, mps_ok, mps_reason, names)


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


# ---------------------------------------------------------------- backends


class MemoryProbe(Protocol):
    """Filled in by a backend's ``track_memory`` context: peak bytes above the level at entry."""

    peak_bytes: int | None
    method: str


@dataclass
class _Memory:
    peak_bytes: int | None = None
    method: str = "none"


class Backend(Protocol):
    """The device-specific part of a measurement. Everything else is device-agnostic."""

    name: str
    timer: str
    #: A sample should last at least this long to be far above timer resolution and overhead.
    min_block_time: float

    def synchronize(self) -> None: ...

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        """Run ``fn`` ``iterations`` times and return the elapsed device time in seconds."""
        ...

    def track_memory(self) -> AbstractContextManager[MemoryProbe]: ...

    def describe(self) -> dict[str, object]: ...


@final
@dataclass
class CpuBackend:
    """Host clock (``perf_counter_ns``): CPU work is synchronous, so no sync is needed."""

    torch_module: Any = None
    name: str = "cpu"
    timer: str = "perf_counter_ns"
    min_block_time: float = 1e-3
    clock_ns: Callable[[], int] = field(default=time.perf_counter_ns)

    def synchronize(self) -> None:
        return None

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        clock = self.clock_ns
        start = clock()
        for _ in repeat(None, iterations):
            fn()
        return (clock() - start) * 1e-9

    @contextmanager
    def track_memory(self) -> Iterator[MemoryProbe]:
        """Peak of the CPU allocator's live bytes during the block, above its level at entry.

        Process RSS and ``ru_maxrss`` miss short-lived peaks and count the allocator's
        caches; tracemalloc does not see torch's allocator. The profiler's memory
        events are every allocation and free that torch's CPU allocator makes, so
        their running sum in time order is the live-bytes curve and its maximum is
        the step's peak working memory.
        """
        from torch.profiler import ProfilerActivity, profile

        probe = _Memory(method="torch.profiler CPU allocator events")
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            yield probe
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
        probe.peak_bytes = peak_of_allocation_events(
            (e.start_ns(), int(e.nbytes())) for e in events if str(e.device_type()).endswith("CPU")
        )

    def describe(self) -> dict[str, object]:
        torch = _torch(self.torch_module)
        return {"device": "cpu", "name": cpu_model(), "threads": int(torch.get_num_threads())}


def peak_of_allocation_events(events: Iterator[tuple[int, int]] | list[tuple[int, int]]) -> int:
    """Maximum of the running sum of (time, +alloc/-free bytes) events, taken in time order."""
    live = peak = 0
    for _, nbytes in sorted(events, key=lambda e: e[0]):
        live += nbytes
        peak = max(peak, live)
    return peak


@final
@dataclass
class CudaBackend:
    """CUDA event pairs recorded on the current stream; the end event is synchronized before reading."""

    index: int
    torch_module: Any = None
    name: str = ""
    timer: str = "torch.cuda.Event pair"
    # Event resolution is about 0.5 us and a launch costs several; 1 ms keeps both under 0.1%.
    min_block_time: float = 1e-3

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"cuda:{self.index}"

    @property
    def _cuda(self) -> Any:
        return _torch(self.torch_module).cuda

    def synchronize(self) -> None:
        self._cuda.synchronize(self.index)

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        cuda = self._cuda
        with cuda.device(self.index):
            stream = cuda.current_stream(self.index)
            start = cuda.Event(enable_timing=True)
            end = cuda.Event(enable_timing=True)
            # Drain earlier work so the host is not still queueing it when the start event fires.
            stream.synchronize()
            start.record(stream)
            for _ in repeat(None, iterations):
                fn()
            end.record(stream)
            end.synchronize()
            return float(start.elapsed_time(end)) * 1e-3

    @contextmanager
    def track_memory(self) -> Iterator[MemoryProbe]:
        cuda = self._cuda
        probe = _Memory(method="torch.cuda.max_memory_allocated")
        cuda.synchronize(self.index)
        base = int(cuda.memory_allocated(self.index))
        cuda.reset_peak_memory_stats(self.index)
        yield probe
        cuda.synchronize(self.index)
        probe.peak_bytes = int(cuda.max_memory_allocated(self.index)) - base

    def describe(self) -> dict[str, object]:
        cuda = self._cuda
        props = cuda.get_device_properties(self.index)
        return {
            "device": f"cuda:{self.index}",
            "name": str(props.name),
            "capability": f"{props.major}.{props.minor}",
            "memory_bytes": int(props.total_memory),
            "multiprocessors": int(props.multi_processor_count),
        }


@final
@dataclass
class MpsBackend:
    """``torch.mps`` events where torch has them, else a host clock bracketed by ``torch.mps.synchronize``."""

    torch_module: Any = None
    name: str = "mps"
    timer: str = "torch.mps.Event pair"
    min_block_time: float = 1e-3
    clock_ns: Callable[[], int] = field(default=time.perf_counter_ns)

    def __post_init__(self) -> None:
        if not hasattr(_torch(self.torch_module).mps, "Event"):
            self.timer = "perf_counter_ns between torch.mps.synchronize calls"

    def synchronize(self) -> None:
        _torch(self.torch_module).mps.synchronize()

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        mps = _torch(self.torch_module).mps
        if hasattr(mps, "Event"):
            start = mps.Event(enable_timing=True)
            end = mps.Event(enable_timing=True)
            mps.synchronize()
            start.record()
            for _ in repeat(None, iterations):
                fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) * 1e-3
        mps.synchronize()
        begin = self.clock_ns()
        for _ in repeat(None, iterations):
            fn()
        mps.synchronize()
        return (self.clock_ns() - begin) * 1e-9

    @contextmanager
    def track_memory(self) -> Iterator[MemoryProbe]:
        # torch.mps has no peak statistic; the growth over the block is the honest lower bound.
        mps = _torch(self.torch_module).mps
        probe = _Memory(method="torch.mps.current_allocated_memory growth (no peak API)")
        mps.synchronize()
        base = int(mps.current_allocated_memory())
        yield probe
        mps.synchronize()
        probe.peak_bytes = max(0, int(mps.current_allocated_memory()) - base)

    def describe(self) -> dict[str, object]:
        return {"device": "mps", "name": "Apple MPS", "host": cpu_model()}


def backend_for(slot: DeviceSlot, torch_module: Any = None) -> Backend:
    if not slot.available:
        raise DeviceError(f"no backend for unavailable device {slot.id}: {slot.reason}")
    if slot.kind == "cpu":
        return CpuBackend(torch_module)
    if slot.kind == "cuda":
        assert slot.index is not None
        return CudaBackend(slot.index, torch_module)
    if slot.kind == "mps":
        return MpsBackend(torch_module)
    raise DeviceError(f"unknown device kind {slot.kind!r}")


def _torch(module: Any) -> Any:
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
    import platform

    return platform.processor() or platform.machine()
