"""A stand-in for ``torch`` with a simulated GPU timeline: host and device clocks, a stream, events, spin kernels.

The host clock advances by what the host spends (Python, launches); each kernel is queued
on the one stream and runs on the device from the later of its launch and the end of the
kernel before it, so a host that launches slower than the device runs leaves the device
idle, and an event records where the stream is when it gets there. That is the behaviour
of CUDA streams that the CUDA backend's biases come from, without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from .kineto_trace import TraceEvent

#: The stand-in's spin rate: torch.cuda._sleep cycles per second (an H100 spun at about 1.9e9 here) ...
SPIN_HZ = 1.9e9
#: ... at its maximum SM clock; an idle H100 sat at IDLE_MHZ (bench/evidence/measurement.md), and spins that much
#: slower.
MAX_MHZ = 1980.0
IDLE_MHZ = 345.0


@dataclass
class FakeGpu:
    #: host seconds per kernel launch (Python + driver)
    launch: float = 5e-6
    #: host seconds to record an event
    record_cost: float = 2e-6
    #: device seconds between a launched kernel (or graph) and the one before it, when queued back to back
    device_gap: float = 0.0
    host: float = 0.0
    #: when the stream's last queued work ends on the device
    stream_end: float = 0.0
    kernels: list[tuple[str, float, float]] = field(default_factory=list)
    l2_bytes: int = 50 << 20
    capturing: bool = False
    captured: list[tuple[str, float]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    #: the SM clock stays at IDLE_MHZ until the device clock reaches this (a GPU ramping up from idle), then MAX_MHZ
    idle_until: float = 0.0
    #: the device that ``torch.cuda.device(i)`` made current
    current_device: int = 0
    #: the device of torch's default capture stream (made on the device current at the first capture; None before)
    capture_stream_device: int | None = None
    #: when the side stream's last queued work ends (``side_kernel``: a stream the current one never waits for)
    side_end: float = 0.0
    side_kernels: list[tuple[str, float, float]] = field(default_factory=list)
    #: the name the device reports (``get_device_properties(i).name``)
    name: str = "Fake H100"

    # ------------------------------------------------------------ the timeline

    def clock(self) -> float:
        return self.host

    def spend(self, seconds: float) -> None:
        """Host work that launches nothing (Python, zero_grad's bookkeeping)."""
        self.host += seconds

    def kernel(self, name: str, seconds: float) -> None:
        """Launch a kernel that runs ``seconds`` on the device."""
        self.host += self.launch
        if self.capturing:
            self.captured.append((name, seconds))
            return
        begin = max(self.stream_end + (self.device_gap if self.kernels else 0.0), self.host)
        self.stream_end = begin + seconds
        self.kernels.append((name, begin, self.stream_end))

    def spin(self, cycles: int) -> None:
        """``torch.cuda._sleep``: a kernel of ``cycles`` clock cycles, as long as the clock at its start makes it."""
        begin = max(self.stream_end, self.host + self.launch)
        mhz = IDLE_MHZ if begin < self.idle_until else MAX_MHZ
        self.kernel("sleep", cycles / (SPIN_HZ * mhz / MAX_MHZ))

    def side_kernel(self, name: str, seconds: float) -> None:
        """Launch a kernel on a side stream that the current stream never waits for: it runs from its launch (or
        the end of the side stream's kernel before it), beside the current stream's work, and only a device-wide
        synchronize (``torch.cuda.synchronize``) waits for it."""
        self.host += self.launch
        begin = max(self.side_end, self.host)
        self.side_end = begin + seconds
        self.side_kernels.append((name, begin, self.side_end))

    def drain(self) -> None:
        self.host = max(self.host, self.stream_end)

    def drain_device(self) -> None:
        """``torch.cuda.synchronize()``: wait for every stream of the device, the side stream's too."""
        self.host = max(self.host, self.stream_end, self.side_end)

    def idle_between(self, begin: float, end: float) -> float:
        """Device seconds without a kernel between two device times."""
        busy = sum(max(0.0, min(e, end) - max(b, begin)) for _, b, e in self.kernels)
        return (end - begin) - busy

    # ------------------------------------------------------------ the torch surface

    def torch(self) -> Any:
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.at: float | None = None

            def record(self, stream: Any = None) -> None:
                gpu.host += gpu.record_cost
                self.at = max(gpu.stream_end, gpu.host)

            def synchronize(self) -> None:
                assert self.at is not None
                gpu.host = max(gpu.host, self.at)

            def elapsed_time(self, end: Any) -> float:
                assert self.at is not None and end.at is not None
                assert gpu.host >= end.at, "an event read before the device reached it"
                return float(end.at - self.at) * 1e3

        class Stream:
            def __init__(self, device: Any = None) -> None:
                self.device = gpu.current_device if device is None else int(device)

            def synchronize(self) -> None:
                gpu.drain()

            def wait_stream(self, other: Any) -> None:
                return None

        class Graph:
            def __init__(self) -> None:
                self.kernels: list[tuple[str, float]] = []

            def replay(self) -> None:
                # One launch for the whole graph; its kernels run back to back.
                gpu.kernel("graph", sum(seconds for _, seconds in self.kernels))

        @contextmanager
        def graph(g: Graph, stream: Any = None) -> Any:
            if stream is None:  # torch's default capture stream: made once, on the device current at the first capture
                if gpu.capture_stream_device is None:
                    gpu.capture_stream_device = gpu.current_device
                device = gpu.capture_stream_device
            else:
                device = stream.device
            # Capturing on another device's stream captures nothing: the kernels go to the current device's stream.
            gpu.capturing, gpu.captured = device == gpu.current_device, []
            try:
                yield
            finally:
                gpu.capturing = False
                g.kernels = list(gpu.captured)

        @contextmanager
        def on_device(index: Any = None) -> Any:
            before = gpu.current_device
            gpu.current_device = before if index is None else int(index)
            try:
                yield
            finally:
                gpu.current_device = before

        @contextmanager
        def nothing(*args: object) -> Any:
            yield

        class Tensor:
            def __init__(self, nbytes: int) -> None:
                self.nbytes = nbytes

            def zero_(self) -> None:
                gpu.kernel("flush", self.nbytes / 3e12)

        def empty(nbytes: int, dtype: Any = None, device: Any = None) -> Tensor:
            gpu.log.append(f"empty {nbytes} on {device}")
            return Tensor(nbytes)

        cuda = SimpleNamespace(
            Event=Event,
            Stream=Stream,
            CUDAGraph=Graph,
            graph=graph,
            stream=nothing,
            device=on_device,
            current_stream=lambda index=None: Stream(),
            synchronize=lambda index=None: gpu.drain_device(),
            _sleep=gpu.spin,
            get_device_properties=lambda index: SimpleNamespace(
                name=gpu.name,
                major=9,
                minor=0,
                total_memory=80 << 30,
                multi_processor_count=132,
                L2_cache_size=gpu.l2_bytes,
            ),
        )
        return SimpleNamespace(cuda=cuda, empty=empty, uint8="uint8")


def step(gpu: FakeGpu, host_before: float, kernels: list[float]) -> Callable[[], None]:
    """A training-step-like call: host work first (zero_grad, autocast), then kernels of the given device times."""

    def fn() -> None:
        gpu.spend(host_before)
        for i, seconds in enumerate(kernels):
            gpu.kernel(f"k{i}", seconds)

    return fn


def loader_step(gpu: FakeGpu, *, pinned: bool, load: float = 10e-3, copy: float = 1e-3) -> Callable[[], None]:
    """A DataLoader step: ``load`` seconds of host work (the next batch), its copy to the device, then a 3 ms
    training step (30 us of host work, twelve 250 us kernels).

    From pinned memory with ``non_blocking=True`` the copy is an asynchronous DMA queued on the stream; from
    pageable memory the host stages it and waits: for the stream to reach the copy, and for the copy to end.
    """
    train = step(gpu, 30e-6, [250e-6] * 12)

    def fn() -> None:
        gpu.spend(load)
        if not pinned:
            gpu.drain()
        gpu.kernel("copy", copy)
        if not pinned:
            gpu.drain()
        train()

    return fn


def plain_loop(gpu: FakeGpu, fn: Callable[[], object], calls: int = 1000) -> float:
    """Seconds per call of ``for _ in range(calls): fn()`` then a synchronize, after ten calls to warm it:
    what the user's loop pays (the last call's device tail is spread over ``calls``)."""
    for _ in range(10):
        fn()
    gpu.drain()
    began = gpu.clock()
    for _ in range(calls):
        fn()
    gpu.drain()
    return (gpu.clock() - began) / calls


# ---------------------------------------------------------------- what kineto would record of the stand-in's run


@dataclass
class _OpenRange:
    """A ``record_function`` range while it is open: its id, and where its first device activity begins and its
    last ends (its GPU span)."""

    id: int
    first: float | None = None
    last: float | None = None


@dataclass
class KinetoGpu(FakeGpu):
    """The stand-in, recording what kineto records of a real GPU's run (the shapes of ``traces/``'s real traces),
    as the events ``read_events`` reads (``kineto_trace.TraceEvent``, times in nanoseconds of the fake clocks):

    * a launch: a ``cuda_runtime`` call ``cudaLaunchKernel`` (``cudaGraphLaunch`` for a graph's replay) on the host
      thread while the host launches, and the ``kernel`` it queued, on the stream, sharing its ``correlation``;
    * a sync (``synchronize``): the ``cuda_runtime`` call ``cudaDeviceSynchronize`` or ``cudaStreamSynchronize``
      while the host waits, and a ``cuda_sync`` device activity of the same correlation (``Context Sync`` on
      stream -1, ``Stream Sync`` on the stream);
    * a ``record_function`` range (``annotate``): a ``user_annotation`` on the host, and a ``gpu_user_annotation``
      from its first device activity to its last, both of the range's own id. Calls and activities made inside a
      range are linked to the innermost (``linked_correlation_id``); outside any range, to nothing (0).

    ``torch()``'s ``cuda.synchronize`` and streams' ``synchronize`` record their syncs."""

    recorded: list[TraceEvent] = field(default_factory=list)
    _open: list[_OpenRange] = field(default_factory=list, init=False, repr=False)
    _last_id: int = field(default=0, init=False, repr=False)

    def _id(self) -> int:
        self._last_id += 1
        return self._last_id

    def _linked(self) -> int:
        return self._open[-1].id if self._open else 0

    def _device_work(self, begin: float, end: float) -> None:
        for opened in self._open:
            opened.first = begin if opened.first is None else min(opened.first, begin)
            opened.last = end if opened.last is None else max(opened.last, end)

    def kernel(self, name: str, seconds: float) -> None:
        launched, queued = self.host, len(self.kernels)
        super().kernel(name, seconds)
        if len(self.kernels) == queued:  # captured into a graph: it runs at the graph's replay
            return
        _, begin, end = self.kernels[-1]
        call, linked = self._id(), self._linked()
        runtime = "cudaGraphLaunch" if name == "graph" else "cudaLaunchKernel"
        self.recorded.append(_host_event(runtime, "cuda_runtime", launched, self.host, call, linked))
        self.recorded.append(_device_event(name, "kernel", begin, end, call, linked, stream=7))
        self._device_work(begin, end)

    def synchronize(self, kind: str = "device") -> None:
        """``torch.cuda.synchronize()`` (``device``) or a stream's ``synchronize()`` (``stream``)."""
        waits = self.host
        self.drain()
        call, linked = self._id(), self._linked()
        runtime, activity, stream = {
            "device": ("cudaDeviceSynchronize", "Context Sync", -1),
            "stream": ("cudaStreamSynchronize", "Stream Sync", 7),
        }[kind]
        self.recorded.append(_host_event(runtime, "cuda_runtime", waits, self.host, call, linked))
        self.recorded.append(_device_event(activity, "cuda_sync", waits, self.host, call, linked, stream=stream))

    @contextmanager
    def annotate(self, name: str) -> Iterator[None]:
        """``record_function(name)``."""
        opened, start = _OpenRange(self._id()), self.host
        self._open.append(opened)
        try:
            yield
        finally:
            self._open.pop()
            self.recorded.append(_host_event(name, "user_annotation", start, self.host, opened.id, 0))
            if opened.first is not None and opened.last is not None:
                span = _device_event(name, "gpu_user_annotation", opened.first, opened.last, 0, opened.id, stream=7)
                self.recorded.append(span)

    def torch(self) -> Any:
        surface = super().torch()
        gpu, plain = self, surface.cuda.Stream

        class Stream(plain):  # type: ignore[misc, valid-type]
            def synchronize(self) -> None:
                gpu.synchronize("stream")

        surface.cuda.Stream = Stream
        surface.cuda.current_stream = lambda index=None: Stream()
        surface.cuda.synchronize = lambda index=None: gpu.synchronize("device")
        return surface

    def events(self) -> list[TraceEvent]:
        """What kineto recorded so far, in the order the host met it."""
        return sorted(self.recorded, key=lambda e: (e.start_ns(), -e.duration_ns()))


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _host_event(name: str, activity: str, start: float, end: float, correlation: int, linked: int) -> TraceEvent:
    return TraceEvent(
        name, _ns(start), _ns(end) - _ns(start), thread=1, activity=activity, correlation=correlation, linked=linked
    )


def _device_event(
    name: str, activity: str, start: float, end: float, correlation: int, linked: int, *, stream: int
) -> TraceEvent:
    return TraceEvent(
        name,
        _ns(start),
        _ns(end) - _ns(start),
        thread=stream,
        activity=activity,
        device="DeviceType.CUDA",
        resource=stream,
        correlation=correlation,
        linked=linked,
    )
