"""The thin device-specific part of timing: one Backend per device kind, behind a small Protocol.

Everything torch-specific is reached through a module object passed in, so the
CUDA logic can be exercised here with a stand-in that records calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Protocol, final

from ._cpu_memory import allocator_probe
from ._devices import DeviceError, DeviceSlot, cpu_model, torch_of

__all__ = [
    "Backend",
    "CpuBackend",
    "CudaBackend",
    "MemoryProbe",
    "MpsBackend",
    "backend_for",
]


class MemoryProbe(Protocol):
    """Filled in by a backend's ``track_memory`` context: peak bytes of a call above the level at its start.

    Run the step once per item of ``calls()`` inside the context (a probe may need more
    than one call, or none); ``peak_bytes`` is then set, or None with ``reason`` saying
    why the peak is unknown.
    """

    peak_bytes: int | None
    method: str
    reason: str | None

    def calls(self) -> Iterator[int]: ...


@dataclass
class _Memory:
    peak_bytes: int | None = None
    method: str = "none"
    reason: str | None = None
    #: how many times ``calls()`` has the step run
    runs: int = 1

    def calls(self) -> Iterator[int]:
        yield from range(self.runs)


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

    def track_memory(self) -> AbstractContextManager[MemoryProbe]:
        """Peak of the CPU allocator's live bytes in a call, above its level at the call's start.

        Process RSS and ``ru_maxrss`` miss short-lived peaks and count the allocator's
        caches; tracemalloc does not see torch's allocator. The profiler's memory events
        are every allocation and free of torch's CPU allocator (``_cpu_memory.py``):
        ``calls()`` runs the step three times, one to settle and two to measure. A block
        run once is measured as it is: right unless it frees older memory before its peak.
        """
        return allocator_probe()

    def describe(self) -> dict[str, object]:
        torch = torch_of(self.torch_module)
        return {"device": "cpu", "name": cpu_model(), "threads": int(torch.get_num_threads())}


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
        return torch_of(self.torch_module).cuda

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
        if not hasattr(torch_of(self.torch_module).mps, "Event"):
            self.timer = "perf_counter_ns between torch.mps.synchronize calls"

    def synchronize(self) -> None:
        torch_of(self.torch_module).mps.synchronize()

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        mps = torch_of(self.torch_module).mps
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
        # torch.mps has current_allocated_memory but no peak: the growth over a call is not its
        # peak (a warm step's is 0), so nothing is reported and the step is not run for it.
        yield _Memory(method="torch.mps", reason="unknown: torch.mps has no peak statistic", runs=0)

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
