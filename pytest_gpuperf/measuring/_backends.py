"""The thin device-specific part of timing: one Backend per device kind, behind a small Protocol.

Everything torch-specific is reached through a module object passed in, so the
CUDA logic can be exercised here with a stand-in that records calls.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any, Final, Protocol, final

from ._cpu_memory import allocator_probe
from ._devices import DeviceError, DeviceSlot, cpu_model, torch_of
from ._lead import Leads, StepLead
from ._settings import MODES

__all__ = [
    "CUDA_EVENT_TIMER",
    "AllCudaBackend",
    "Backend",
    "CpuBackend",
    "CudaBackend",
    "MemoryProbe",
    "ModeUnsupported",
    "MpsBackend",
    "backend_for",
    "block_timer",
    "cpu_cache_bytes",
]


class MemoryProbe(Protocol):
    """Filled in by a backend's ``track_memory`` context: the high-water mark of a call, and what it is made of.

    Run the step once per item of ``calls()`` inside the context (a probe may need more
    than one call, or none). Then ``peak_bytes`` is the call's high-water mark: everything
    allocated at its peak, what was resident at the call's start (weights, gradients,
    optimizer state, inputs) included, as ``torch.cuda.max_memory_allocated`` reports it;
    or None with ``reason`` saying why it is unknown. ``resident_bytes`` is the level at
    the call's start on the same counter, ``transient_bytes`` the growth above the start
    (read as ``transient_method`` says: on a CPU a counter of its own), ``reserved_bytes``
    the allocator's reserved high-water mark (what out of memory depends on; on CUDA with
    the cache emptied first, as a CUDA probe's ``reserved_method`` says), ``devices``
    each device's high-water mark where the call used more than one. Each is None (empty)
    where the device does not tell.
    """

    peak_bytes: int | None
    method: str
    reason: str | None
    resident_bytes: int | None
    transient_bytes: int | None
    transient_method: str
    reserved_bytes: int | None
    devices: dict[str, int]

    def calls(self) -> Iterator[int]: ...


@dataclass
class _Memory:
    peak_bytes: int | None = None
    method: str = "none"
    reason: str | None = None
    #: how many times ``calls()`` has the step run
    runs: int = 1
    resident_bytes: int | None = None
    transient_bytes: int | None = None
    transient_method: str = ""
    reserved_bytes: int | None = None
    devices: dict[str, int] = field(default_factory=dict)
    #: how ``reserved_bytes`` was read ("" where it was not)
    reserved_method: str = ""

    def calls(self) -> Iterator[int]:
        yield from range(self.runs)


#: How the CUDA backends read a call's high-water mark, and its transient part.
CUDA_PEAK: Final = "torch.cuda.max_memory_allocated"
CUDA_TRANSIENT: Final = "torch.cuda.max_memory_allocated above memory_allocated at the call's start"
#: How they read its reserved high-water mark: from an emptied cache, so that what earlier tests left cached (nothing
#: else empties it between tests) is no part of it.
CUDA_RESERVED: Final = "torch.cuda.max_memory_reserved after torch.cuda.empty_cache()"


def _cuda_peaks(cuda: Any, probe: _Memory, bases: dict[int, int], measured: int | None) -> None:
    """Fill ``probe`` from the allocator's statistics of the devices in ``bases`` (index -> bytes allocated at
    the call's start), reset there before the call, after the cache was emptied (``_reset_for_call``).

    The devices the call allocated on (and ``measured``) each get their high-water mark in
    ``probe.devices`` where there is more than one (DataParallel's replicas); the peak,
    resident, transient and reserved figures are the device's whose high-water mark is
    the largest (the first to run out of memory), ``measured`` on a tie.
    """
    peaks = {index: int(cuda.max_memory_allocated(index)) for index in bases}
    used = {index: peak for index, peak in peaks.items() if peak > bases[index] or index == measured}
    if not used:  # a call that allocated nothing: the device holding the most
        largest = max(peaks, key=lambda index: peaks[index])
        used = {largest: peaks[largest]}
    order = sorted(used, key=lambda index: (-used[index], index != measured, index))
    top = order[0]
    probe.peak_bytes = used[top]
    probe.resident_bytes = bases[top]
    probe.transient_bytes = used[top] - bases[top]
    probe.transient_method = CUDA_TRANSIENT
    probe.reserved_bytes = int(cuda.max_memory_reserved(top))
    probe.reserved_method = CUDA_RESERVED
    if len(used) > 1:
        probe.devices = {f"cuda:{index}": used[index] for index in sorted(used)}
        probe.method = f"{CUDA_PEAK} (the largest of {len(used)} devices: cuda:{top})"
    else:
        probe.method = CUDA_PEAK


def _reset_for_call(cuda: Any, devices: Iterable[int]) -> dict[int, int]:
    """Empty the allocator's cache (every device's), then reset the peak statistics of ``devices``; the bytes each
    has allocated (its level at the call's start). Without the emptying, the reserved high-water mark would start
    at the whole cache: what earlier tests left, not what the call needs."""
    cuda.empty_cache()
    bases = {index: int(cuda.memory_allocated(index)) for index in devices}
    for index in bases:
        cuda.reset_peak_memory_stats(index)
    return bases


class ModeUnsupported(ValueError):
    """A timing mode (cold, graph) this device or this step cannot do; the message says why and what to use."""


#: The CUDA backend's timer, as a Measurement records it.
CUDA_EVENT_TIMER: Final = "torch.cuda.Event pair"
#: Graph mode captures enough calls per graph for a replay to last this long (a launch's cost spread over them) ...
GRAPH_REPLAY_TIME: Final = 200e-6
#: ... but no more calls than this.
GRAPH_MAX_CALLS: Final = 64
#: Replays of a one-call graph timed to learn how many calls a graph should hold.
PROBE_REPLAYS: Final = 3


class Backend(Protocol):
    """The device-specific part of a measurement. Everything else is device-agnostic."""

    name: str
    timer: str
    #: A sample should last at least this long to be far above timer resolution and overhead.
    min_block_time: float
    #: Host seconds spent launching the last block, where that differs from its time (asynchronous devices).
    last_host: float | None
    #: Device seconds of the last block with the queue kept full, where that differs from its time (else None).
    last_device: float | None
    #: The last block's lead ended before the host had launched the block: the device may have idled inside it.
    last_short: bool
    #: Seconds the last block cost beyond its calls' time that more calls in a block would share, else None: the
    #: device work a host-bound step's last call left (a loop overlaps it with the next call's host work), or the
    #: untimed call a synchronizing step's block starts with.
    last_tail: float | None

    def synchronize(self) -> None: ...

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        """Run ``fn`` ``iterations`` times and return the seconds a loop of them pays, in steady state: on an
        asynchronous device the larger of the device time and the host time (``last_device``, ``last_host``)."""
        ...

    def same_step(self, key: object) -> AbstractContextManager[None]:
        """Blocks timed inside are of the one step ``key`` stands for, whatever callable they run (a step built
        afresh every round, its graph's replays): what the backend learns of the step's calls (on CUDA, its launch
        lead) carries over from one to the next. ``key`` is held weakly: its caller keeps it while it measures."""
        ...

    def time_cold(self, fn: Callable[[], object], iterations: int) -> float:
        """Like ``time_block``, with the caches flushed before each call and the flush left out of the time."""
        ...

    def time_latency(self, fn: Callable[[], object], iterations: int, *, flush: bool = False) -> float:
        """The sum of ``iterations`` calls' latencies, each from the call to its result on an idle device (with
        ``flush``, after the caches are flushed, the flush left out)."""
        ...

    def capture(self, fn: Callable[[], object], calls: int = 1) -> Callable[[], object]:
        """A callable that replays ``calls`` calls of ``fn`` captured in one CUDA graph; ModeUnsupported with the
        reason where it cannot."""
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
    last_host: float | None = None
    last_device: float | None = None
    last_short: bool = False
    last_tail: float | None = None
    _flush: Any = field(default=None, repr=False)

    def synchronize(self) -> None:
        return None

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        return host_block(self.clock_ns, fn, iterations)

    def same_step(self, key: object) -> AbstractContextManager[None]:
        return nullcontext()  # a host clock learns nothing of a step

    def time_latency(self, fn: Callable[[], object], iterations: int, *, flush: bool = False) -> float:
        """CPU work is synchronous: a call's time is its latency."""
        return self.time_cold(fn, iterations) if flush else self.time_block(fn, iterations)

    def time_cold(self, fn: Callable[[], object], iterations: int) -> float:
        """Each call timed alone after writing a buffer twice the size of the last-level cache."""
        if self._flush is None:
            torch = torch_of(self.torch_module)
            self._flush = torch.empty(2 * cpu_cache_bytes(), dtype=torch.uint8)
        clock = self.clock_ns
        total = 0
        for i in range(iterations):
            self._flush.fill_(i & 0xFF)
            start = clock()
            fn()
            total += clock() - start
        return total * 1e-9

    def capture(self, fn: Callable[[], object], calls: int = 1) -> Callable[[], object]:
        raise ModeUnsupported("graph mode needs a CUDA device: CUDA graphs replay GPU work; use warm on cpu")

    def track_memory(self) -> AbstractContextManager[MemoryProbe]:
        """The process's RSS high-water mark over a call (the only absolute figure a CPU gives), and the growth
        of torch's CPU allocator's live bytes above the call's start (its transient part).

        torch's CPU allocator keeps no statistics, and its profiler sees only what was allocated
        while it watched: the weights, gradients and optimizer state resident before a call are
        no part of its figure, so that figure is the transient, never the peak. The absolute
        figure is the process's (``VmHWM`` after a reset through ``/proc/self/clear_refs``,
        Linux): the interpreter and torch's libraries included, and blocks the C allocator
        keeps after they are freed. ``calls()`` runs the step four times: one to settle and two
        to measure under the profiler (``_cpu_memory.py``), one for the RSS. A block run once is
        measured as it is: its transient part is right unless it frees older memory before its peak.
        """
        return allocator_probe()

    def describe(self) -> dict[str, object]:
        torch = torch_of(self.torch_module)
        return {"device": "cpu", "name": cpu_model(), "threads": int(torch.get_num_threads())}


@final
@dataclass
class CudaBackend:
    """CUDA event pairs on the current stream; a block's time is what a loop of its calls pays in steady state
    (``docs/timing.md``).

    **Behind a lead** (``_lead.py``): the host queues the whole block behind a spin kernel, so that the events time
    the device's work back to back (``last_device``); the host's own time over the block is kept too
    (``last_host``), and the block's time is the larger of the two (where the host needs longer, loading data or
    Python, a loop runs at the host's speed). A block whose lead ended before the host had launched it is counted
    in ``short_leads`` (the device may have idled inside it), and flagged where its time is the device's
    (``last_short``). A clearly host-bound step gets a lead sized from its device time, which its host outlasts: the
    block's time is the host's, and ``last_device`` the device time last read with the queue kept full.

    **A step that synchronizes** gets no lead: each block is timed right after an untimed call whose device work is
    still in flight, as in a loop, and its time is the larger of the events' and the host's (both the loop's,
    neither the step's own: ``last_device`` and ``last_host`` are None).

    Timing is on the current stream of the device: work a step queues on other streams must be joined to it
    (``current_stream().wait_stream(side)``) to be inside the time.
    """

    index: int
    torch_module: Any = None
    name: str = ""
    timer: str = CUDA_EVENT_TIMER
    # Event resolution is about 0.5 us; with launch latency kept out of the block, 1 ms keeps it under 0.1%.
    min_block_time: float = 1e-3
    clock: Callable[[], float] = field(default=time.perf_counter)
    #: host seconds over the last timed block (None before the first, and for a step that synchronizes)
    last_host: float | None = None
    #: device seconds of the last block behind its lead (None before the first, and for a step that synchronizes)
    last_device: float | None = None
    #: the last block's lead ended before the host had launched the block, and its time is the device's
    last_short: bool = False
    last_tail: float | None = None
    #: blocks whose lead ended before the host had launched them (the GPU may have idled inside them)
    short_leads: int = 0
    _leads: Leads = field(default_factory=Leads, repr=False)
    #: the key of the step timed inside ``same_step``; None: each callable is a step of its own
    _step: object = field(default=None, repr=False)
    _flush: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"cuda:{self.index}"

    @property
    def _cuda(self) -> Any:
        return torch_of(self.torch_module).cuda

    def synchronize(self) -> None:
        self._cuda.synchronize(self.index)

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        with self._cuda.device(self.index):
            state = self._lead_of(fn)
            if not self._leads.applies(self._cuda, state):
                return self._steady(fn, iterations)
            return self._behind_lead(fn, iterations, state)

    @contextmanager
    def same_step(self, key: object) -> Iterator[None]:
        """Blocks timed inside share the launch lead of the step ``key`` stands for (``Backend.same_step``): a new
        build of a step starts from its predecessor's host time, and a step found to synchronize stays found."""
        outer, self._step = self._step, key
        try:
            yield
        finally:
            self._step = outer

    def _lead_of(self, fn: Callable[[], object]) -> StepLead:
        return self._leads.of(fn if self._step is None else self._step)

    def time_cold(self, fn: Callable[[], object], iterations: int) -> float:
        """Each call timed alone after the L2 is flushed (a write of twice its size); the flush is not timed."""
        with self._cuda.device(self.index):
            flush = self._flush_buffer()
            state = self._lead_of(fn)
            total, device, host = 0.0, 0.0, 0.0
            for _ in range(iterations):
                flush.zero_()
                if not self._leads.applies(self._cuda, state):
                    total += self._call_to_result(fn)
                    continue
                total += self._behind_lead(fn, 1, state)
                device += self.last_device or 0.0
                host += self.last_host or 0.0
            steady = self._leads.applies(self._cuda, state)
            self.last_device, self.last_host = (device, host) if steady else (None, None)
            self.last_tail = None  # each call is timed alone: a larger block shares no tail
            return total

    def time_latency(self, fn: Callable[[], object], iterations: int, *, flush: bool = False) -> float:
        """Each call from the call to its result: its start event recorded on the idle stream, no lead."""
        with self._cuda.device(self.index):
            buffer = self._flush_buffer() if flush else None
            total = 0.0
            for _ in range(iterations):
                if buffer is not None:
                    buffer.zero_()
                total += self._call_to_result(fn)
            return total

    def capture(self, fn: Callable[[], object], calls: int = 1) -> Callable[[], object]:
        """``calls`` calls of ``fn`` captured in one CUDA graph on a stream of this device; the returned callable
        replays them (ModeUnsupported if the step cannot be captured).

        The capture stream is named: torch's default capture stream is made once, on the device
        current at the first capture, and a capture for another device on it records nothing."""
        cuda = self._cuda
        with cuda.device(self.index):
            side = cuda.Stream(self.index)
            side.wait_stream(cuda.current_stream(self.index))
            try:
                with cuda.stream(side):  # capture needs warm calls on a side stream first
                    for _ in range(3):
                        fn()
                cuda.current_stream(self.index).wait_stream(side)
                graph = cuda.CUDAGraph()
                with cuda.graph(graph, stream=side):
                    for _ in range(calls):
                        fn()
            except Exception as exc:  # noqa: BLE001 - every capture failure is refused with its reason
                cuda.synchronize(self.index)
                raise ModeUnsupported(
                    f"graph mode: the step cannot be captured in a CUDA graph on {self.name}: "
                    f"{type(exc).__name__}: {exc}. A capturable step launches only CUDA work on the current "
                    "stream: no host syncs (.item(), .cpu(), printing a tensor), no CPU tensors, no new "
                    "allocations of changing size; time it in warm mode instead"
                ) from None
            cuda.synchronize(self.index)
        replay: Callable[[], object] = graph.replay
        return replay

    def _events(self, count: int) -> list[Any]:
        return [self._cuda.Event(enable_timing=True) for _ in range(count)]

    def _behind_lead(self, fn: Callable[[], object], iterations: int, state: StepLead) -> float:
        """A block behind a spin kernel: the larger of its device time and its host time (the class docstring)."""
        cuda = self._cuda
        stream = cuda.current_stream(self.index)
        ready, start, end = self._events(3)
        stream.synchronize()
        ready.record(stream)
        queued = self.clock()
        planned, cycles = self._leads.queue(cuda, state, iterations)
        start.record(stream)
        began = self.clock()
        for _ in repeat(None, iterations):
            fn()
        end.record(stream)
        done = self.clock()
        end.synchronize()
        waited = self.clock() - done
        ran = float(ready.elapsed_time(start)) * 1e-3
        self._leads.relearn(cycles, ran, began - queued)
        host = done - began
        # Behind a lead sized for a host-bound step's device time, the device's own time is the one it last read
        # with the queue kept full (``_lead.py``): the host paces the block, and the block's time is the host's.
        short, device = self._leads.launched(
            state, host, float(start.elapsed_time(end)) * 1e-3, iterations, planned, ran, done - queued
        )
        self.short_leads += short
        # Behind a lead the host outlasted (a host-bound step's), the host waited at the end for its last call's
        # device work only: a block of more calls shares that tail (the sampler sizes blocks so that it is small).
        self.last_tail = waited if short and state.host_bound else None
        self.last_host = None if state.syncs else host
        self.last_device = None if state.syncs else device
        # Idle time inside the block can raise only the device's time: a host-bound block's time is the host's.
        self.last_short = short and device >= host
        return max(device, host)

    def _steady(self, fn: Callable[[], object], iterations: int) -> float:
        """A block timed right after an untimed call whose work is still in flight, as in a loop (class docstring)."""
        return self._bracketed(fn, iterations, in_flight=True)

    def _call_to_result(self, fn: Callable[[], object]) -> float:
        """One call from the call to its result: the stream drained, the start event recorded on it idle."""
        return self._bracketed(fn, 1, in_flight=False)

    def _bracketed(self, fn: Callable[[], object], iterations: int, *, in_flight: bool) -> float:
        """``iterations`` calls with no lead, the larger of the events' and the host clock's time around them: after
        an untimed call still in flight (``in_flight``), or on the drained stream."""
        stream = self._cuda.current_stream(self.index)
        start, end = self._events(2)
        untimed = self.clock()
        if in_flight:
            fn()
        else:
            stream.synchronize()
        untimed = self.clock() - untimed
        start.record(stream)
        began = self.clock()
        for _ in repeat(None, iterations):
            fn()
        end.record(stream)
        host = self.clock() - began
        end.synchronize()
        self.last_device, self.last_host, self.last_short = None, None, False
        self.last_tail = untimed if in_flight else None
        return max(float(start.elapsed_time(end)) * 1e-3, host)

    def _flush_buffer(self) -> Any:
        if self._flush is None:
            torch = torch_of(self.torch_module)
            l2 = int(getattr(self._cuda.get_device_properties(self.index), "L2_cache_size", 0) or 0)
            self._flush = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device=self.name)
        return self._flush

    @contextmanager
    def track_memory(self) -> Iterator[MemoryProbe]:
        """The call's high-water mark on this device (``max_memory_allocated`` after a reset at its start), the
        level at its start and the growth above it, the reserved high-water mark from an emptied cache
        (``CUDA_RESERVED``), and each device's where the call used several (DataParallel).

        The allocator's statistics are kept on the host, per device, and this process's only:
        reading them synchronizes no other device and creates no context there. Emptying the cache frees this
        process's cached segments only (a ``cudaFree`` each, outside the time).
        """
        cuda = self._cuda
        probe = _Memory(method=CUDA_PEAK)
        # Inside the device's context, so that a step using the current device allocates where it is probed.
        with cuda.device(self.index):
            cuda.synchronize(self.index)
            count = int(cuda.device_count()) if hasattr(cuda, "device_count") else self.index + 1
            bases = _reset_for_call(cuda, {self.index, *range(count)})
            yield probe
            cuda.synchronize(self.index)
            _cuda_peaks(cuda, probe, bases, self.index)

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
class AllCudaBackend:
    """A host clock read after ``torch.cuda.synchronize`` on the CUDA devices a step that names none may use.

    pytest-benchmark's ``benchmark`` fixture times such steps (``plugin/_benchmark.py``). In a
    process that has the machine, a step that names no device may use any GPU (DataParallel,
    a model split over two), so ``devices`` is every visible one and the record's device is
    ``cuda``; of them, only those the process has a CUDA context on are synchronized (its work
    can be nowhere else), so that none is opened on a GPU the step never used. In a process
    bound to one GPU (an xdist worker, a torchrun rank: ``Binding``) it is that GPU alone, made
    current for the test, and the name is ``cuda:N``: the process neither waits for nor opens
    a context on another worker's GPU.
    A sample is 10 ms at least (``min_block_time``): the synchronizations at its end
    (a few microseconds per idle device) stay below 0.5% of it even with 8 devices.
    What the clock sees includes the host's launch time of the first call; a step timed
    on a named device is timed with CUDA events instead (``CudaBackend``).
    """

    #: the CUDA device indices synchronized around every block, those of them the process has a context on
    devices: tuple[int, ...]
    torch_module: Any = None
    #: ``cuda`` for every visible device, ``cuda:N`` for a process bound to one
    name: str = "cuda"
    timer: str = ""
    min_block_time: float = 10e-3
    clock_ns: Callable[[], int] = field(default=time.perf_counter_ns)
    last_host: float | None = None
    last_device: float | None = None
    last_short: bool = False
    last_tail: float | None = None

    def __post_init__(self) -> None:
        if not self.timer:
            which = ", ".join(map(str, self.devices)) if self.name != "cuda" else "every visible device"
            self.timer = f"perf_counter_ns between torch.cuda.synchronize() of {which}"

    @property
    def _cuda(self) -> Any:
        return torch_of(self.torch_module).cuda

    def synchronize(self) -> None:
        cuda = self._cuda
        for index in self._in_use():
            cuda.synchronize(index)

    def _in_use(self) -> tuple[int, ...]:
        """The devices to synchronize: those where this process has a CUDA context. One without holds none of its
        work, and synchronizing it would open one (hundreds of MiB of that GPU's memory, in every test process).
        Every device where torch cannot tell (its private ``torch._C._cuda_hasPrimaryContext`` is missing)."""
        has_context = getattr(getattr(torch_of(self.torch_module), "_C", None), "_cuda_hasPrimaryContext", None)
        if has_context is None:
            return self.devices
        return tuple(index for index in self.devices if has_context(index))

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        return host_block(self.clock_ns, fn, iterations, sync=self.synchronize)

    def same_step(self, key: object) -> AbstractContextManager[None]:
        return nullcontext()  # no lead: every block is synchronized at both ends

    def time_cold(self, fn: Callable[[], object], iterations: int) -> float:
        raise ModeUnsupported(
            "cold mode needs a named device (the L2 of which GPU?): time the step with the gpuperf fixture, "
            "or use warm for benchmark tests"
        )

    def time_latency(self, fn: Callable[[], object], iterations: int, *, flush: bool = False) -> float:
        """Each call between synchronizations of every device: from the call to its result."""
        return latency_of_blocks(self, fn, iterations, flush=flush)

    def capture(self, fn: Callable[[], object], calls: int = 1) -> Callable[[], object]:
        raise ModeUnsupported(
            "graph mode needs a named device: time the step with the gpuperf fixture, or use warm for benchmark tests"
        )

    @contextmanager
    def track_memory(self) -> Iterator[MemoryProbe]:
        """The largest high-water mark over the visible devices, with each device's that the call allocated on."""
        cuda = self._cuda
        probe = _Memory(method=CUDA_PEAK)
        self.synchronize()
        bases = _reset_for_call(cuda, self.devices)
        yield probe
        self.synchronize()
        _cuda_peaks(cuda, probe, bases, None)

    def describe(self) -> dict[str, object]:
        cuda = self._cuda
        names = [str(cuda.get_device_properties(index).name) for index in self.devices]
        return {"device": self.name, "name": ", ".join(dict.fromkeys(names)), "count": len(self.devices)}


@final
@dataclass
class MpsBackend:
    """``torch.mps`` events where torch has them, else a host clock bracketed by ``torch.mps.synchronize``."""

    torch_module: Any = None
    name: str = "mps"
    timer: str = "torch.mps.Event pair"
    min_block_time: float = 1e-3
    clock_ns: Callable[[], int] = field(default=time.perf_counter_ns)

    last_host: float | None = None
    last_device: float | None = None
    last_short: bool = False
    last_tail: float | None = None

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
        return host_block(self.clock_ns, fn, iterations, sync=mps.synchronize)

    def same_step(self, key: object) -> AbstractContextManager[None]:
        return nullcontext()  # no lead is queued on mps

    def time_cold(self, fn: Callable[[], object], iterations: int) -> float:
        raise ModeUnsupported("cold mode is not available on mps: its cache cannot be flushed from torch; use warm")

    def time_latency(self, fn: Callable[[], object], iterations: int, *, flush: bool = False) -> float:
        """Each call from a synchronized device to its result (no lead is queued on mps)."""
        return latency_of_blocks(self, fn, iterations, flush=flush)

    def capture(self, fn: Callable[[], object], calls: int = 1) -> Callable[[], object]:
        raise ModeUnsupported("graph mode needs a CUDA device: CUDA graphs replay GPU work; use warm on mps")

    @contextmanager
    def track_memory(self) -> Iterator[MemoryProbe]:
        # torch.mps has current_allocated_memory but no high-water mark: the growth over a call is no
        # figure of its peak (a warm step's is 0), so nothing is reported and the step is not run for it.
        yield _Memory(method="torch.mps", reason="unknown: torch.mps has no peak statistic", runs=0)

    def describe(self) -> dict[str, object]:
        return {"device": "mps", "name": "Apple MPS", "host": cpu_model()}


def cpu_cache_bytes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """Size of the largest (last-level) CPU cache from sysfs; 64 MiB where it cannot be read."""
    sizes = []
    for index in root.glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=64 << 20)


def host_block(
    clock_ns: Callable[[], int],
    fn: Callable[[], object],
    iterations: int,
    *,
    sync: Callable[[], object] | None = None,
) -> float:
    """Seconds for ``iterations`` calls of ``fn`` on the host clock; with ``sync``, the device work queued before
    is drained first and the block's own is waited for before the clock is read again."""
    if sync is not None:
        sync()
    start = clock_ns()
    for _ in repeat(None, iterations):
        fn()
    if sync is not None:
        sync()
    return (clock_ns() - start) * 1e-9


def latency_of_blocks(backend: Backend, fn: Callable[[], object], iterations: int, *, flush: bool) -> float:
    """``time_latency`` of a backend whose every block is synchronized at both ends: each call a block of its own
    (with ``flush``, its cold mode, which times each call alone)."""
    if flush:
        return backend.time_cold(fn, iterations)
    return sum(backend.time_block(fn, 1) for _ in range(iterations))


def block_timer(
    backend: Backend, fn: Callable[[], object], mode: str, *, per_call: bool = False
) -> Callable[[int], float]:
    """``run_block(iterations) -> seconds`` for ``fn`` in timing ``mode`` (graph mode captures ``fn`` first).

    ``per_call``: each call's latency, from the call to its result (``time_latency``; in graph
    mode, of a graph of one call); otherwise what a loop of the calls pays (``time_block``)."""
    if mode == "graph":
        return _graph_timer(backend, fn, per_call=per_call)
    if mode not in MODES:
        raise ModeUnsupported(f"unknown timing mode {mode!r}; the modes are: {', '.join(MODES)}")
    cold = mode == "cold"
    if per_call:
        return lambda iterations: backend.time_latency(fn, iterations, flush=cold)
    if cold:
        return lambda iterations: backend.time_cold(fn, iterations)
    return lambda iterations: backend.time_block(fn, iterations)


def _graph_timer(backend: Backend, fn: Callable[[], object], *, per_call: bool = False) -> Callable[[int], float]:
    """Replays of a graph of enough calls of ``fn`` to last ``GRAPH_REPLAY_TIME``, timed per call.

    Each graph launch costs the GPU time of its own: on an H100 a graph of one 52 us
    elementwise call read 2.0% over a graph of 20 such calls (``bench/evidence/measurement.md``), so a
    graph of one short call would carry that cost whole. So one call is captured and timed,
    then as many calls as fill ``GRAPH_REPLAY_TIME`` (at most ``GRAPH_MAX_CALLS``) are
    captured in the graph that is timed. A block of ``iterations`` calls runs whole
    replays and is scaled to ``iterations`` calls, its host and device times too. ``per_call`` keeps
    the graph of one call and times each replay from the call to its result (``time_latency``).
    """
    replay = backend.capture(fn)
    if per_call:
        return lambda iterations: backend.time_latency(replay, iterations)
    calls = graph_calls(backend.time_block(replay, PROBE_REPLAYS) / PROBE_REPLAYS)
    if calls > 1:
        replay = backend.capture(fn, calls)

    def run(iterations: int) -> float:
        replays = -(-iterations // calls)
        seconds = backend.time_block(replay, replays)
        scale = iterations / (replays * calls)
        if backend.last_host is not None:
            backend.last_host *= scale
        if backend.last_device is not None:
            backend.last_device *= scale
        return seconds * scale

    return run


def graph_calls(per_call: float) -> int:
    """Calls captured per graph so that one replay lasts ``GRAPH_REPLAY_TIME`` (1 to ``GRAPH_MAX_CALLS``)."""
    if not per_call > 0:
        return GRAPH_MAX_CALLS
    return max(1, min(GRAPH_MAX_CALLS, math.ceil(GRAPH_REPLAY_TIME / per_call)))


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
