"""A stand-in for ``torch`` with a simulated GPU timeline: host and device clocks, a stream, events, spin kernels.

The host clock advances by what the host spends (Python, launches); each kernel is queued
on the one stream and runs on the device from the later of its launch and the end of the
kernel before it, so a host that launches slower than the device runs leaves the device
idle, and an event records where the stream is when it gets there. That is the behaviour
of CUDA streams that the CUDA backend's biases come from, without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

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
