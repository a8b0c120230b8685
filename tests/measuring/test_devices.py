"""Device parsing and resolution, and the backends' logic; CUDA through a stand-in torch that records calls."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pytest_gpuperf.measuring import (
    AllCudaBackend,
    DeviceError,
    Inventory,
    parse_device_option,
    probe_inventory,
    resolve_devices,
)
from pytest_gpuperf.measuring._backends import CpuBackend, CudaBackend, MpsBackend

CPU_ONLY = Inventory(0, "torch 2.13.0+cpu was built without CUDA", False, "MPS needs Apple silicon")
TWO_GPUS = Inventory(2, "", False, "MPS needs Apple silicon")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gpu", "'gpu' is not a device (for an NVIDIA GPU write cuda or cuda:N)"),
        ("cuda:x", "'cuda:x' is not a device (the index after cuda: is a whole number"),
        ("cpu,,cuda", "has an empty item"),
        ("", "is empty"),
        ("tpu", "'tpu' is not a device; use cpu, cuda, cuda:N, mps, auto, all"),
    ],
)
def test_bad_device_names_are_refused_with_the_fix(text: str, fragment: str) -> None:
    with pytest.raises(DeviceError) as info:
        parse_device_option(text)
    assert fragment in str(info.value)


def ids(tokens: str, inventory: Inventory) -> list[tuple[str, bool]]:
    return [(s.id, s.available) for s in resolve_devices(parse_device_option(tokens), inventory)]


def test_resolution_on_a_cpu_only_machine() -> None:
    assert ids("auto", CPU_ONLY) == [("cpu", True)]
    assert ids("all", CPU_ONLY) == [("cpu", True)]
    assert ids("cpu,cuda", CPU_ONLY) == [("cpu", True), ("cuda", False)]
    (slot,) = resolve_devices(("cuda",), CPU_ONLY)
    assert slot.reason == "cuda was requested but torch 2.13.0+cpu was built without CUDA; devices here: cpu"
    (slot,) = resolve_devices(("mps",), CPU_ONLY)
    assert not slot.available and "MPS needs Apple silicon" in slot.reason


def test_resolution_with_two_gpus() -> None:
    assert ids("auto", TWO_GPUS) == [("cuda:0", True)]
    assert ids("cuda", TWO_GPUS) == [("cuda:0", True)]
    assert ids("cuda,cuda:0,cuda:1", TWO_GPUS) == [("cuda:0", True), ("cuda:1", True)]
    assert ids("all", TWO_GPUS) == [("cpu", True), ("cuda:0", True), ("cuda:1", True)]
    (slot,) = resolve_devices(("cuda:3",), TWO_GPUS)
    assert not slot.available
    assert (
        slot.reason == "cuda:3 was requested but this machine has 2 CUDA device(s); devices here: cpu, cuda:0, cuda:1"
    )


def test_probe_inventory_on_this_machine() -> None:
    inventory = probe_inventory()
    assert inventory.cuda_count == torch.cuda.device_count()
    if not torch.cuda.is_available():
        assert torch.__version__ in inventory.cuda_reason


class Recorder:
    """A stand-in for ``torch``: just enough of torch.cuda to drive CudaBackend, logging every call."""

    def __init__(self, elapsed_ms: float = 2.5) -> None:
        self.log: list[str] = []
        self.elapsed_ms = elapsed_ms
        self.allocated = 1000
        self.peak = 1000
        log = self.log
        recorder = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing, "timing events must be created with enable_timing=True"
                self.name = f"event{sum(1 for e in log if e.startswith('new'))}"
                log.append(f"new {self.name}")

            def record(self, stream: Any = None) -> None:
                log.append(f"record {self.name} on {stream}")

            def synchronize(self) -> None:
                log.append(f"synchronize {self.name}")

            def elapsed_time(self, end: Any) -> float:
                log.append(f"elapsed_time {self.name}->{end.name}")
                return recorder.elapsed_ms

        class Stream:
            def __str__(self) -> str:
                return "stream"

            def synchronize(self) -> None:
                log.append("stream.synchronize")

        class DeviceContext:
            def __init__(self, index: int) -> None:
                self.index = index

            def __enter__(self) -> None:
                log.append(f"enter device {self.index}")

            def __exit__(self, *args: object) -> None:
                log.append("exit device")

        def reset_peak(index: int) -> None:
            log.append("reset_peak_memory_stats")
            recorder.peak = recorder.allocated

        self.cuda = SimpleNamespace(
            Event=Event,
            device=DeviceContext,
            current_stream=lambda index: Stream(),
            synchronize=lambda index=None: log.append("cuda.synchronize"),
            memory_allocated=lambda index: recorder.allocated,
            max_memory_allocated=lambda index: recorder.peak,
            max_memory_reserved=lambda index: 2 << 20,
            empty_cache=lambda: None,
            reset_peak_memory_stats=reset_peak,
            get_device_properties=lambda index: SimpleNamespace(
                name="Fake GPU", major=9, minor=0, total_memory=80 * 2**30, multi_processor_count=132
            ),
        )


def test_cuda_events_bracket_the_calls_on_the_current_stream() -> None:
    fake = Recorder(elapsed_ms=2.5)
    backend = CudaBackend(1, torch_module=fake)
    seconds = backend.time_block(lambda: fake.log.append("call"), 3)
    assert seconds == pytest.approx(2.5e-3)
    assert fake.log == [
        "enter device 1",
        "new event0",
        "new event1",
        "call",  # no spin kernel here: the block follows a call still in flight, as in a loop
        "record event0 on stream",
        "call",
        "call",
        "call",
        "record event1 on stream",
        "synchronize event1",  # never read an event before the device has reached it
        "elapsed_time event0->event1",
        "exit device",
    ]


def test_cuda_peak_memory_is_the_high_water_mark_with_the_level_at_entry_and_the_growth() -> None:
    fake = Recorder()
    backend = CudaBackend(0, torch_module=fake)
    with backend.track_memory() as probe:
        fake.peak = 1000 + 4096  # the step allocated 4 KiB at its peak
    assert probe.peak_bytes == 1000 + 4096  # the 1000 B resident at the call's start included
    assert probe.resident_bytes == 1000 and probe.transient_bytes == 4096 and probe.reserved_bytes == 2 << 20
    assert fake.log.index("reset_peak_memory_stats") > fake.log.index("cuda.synchronize")
    assert fake.log[-2:] == ["cuda.synchronize", "exit device"]  # synchronized before the peak was read
    assert fake.log[0] == "enter device 0"  # probed inside the device's context
    assert backend.describe()["capability"] == "9.0"


def cuda_stand_in(log: list[str], count: int = 2) -> Any:
    """Just enough of ``torch`` for AllCudaBackend, logging every call."""
    peaks = {0: 300, 1: 900}
    cuda = SimpleNamespace(
        synchronize=lambda index: log.append(f"synchronize {index}"),
        memory_allocated=lambda index: 100,
        reset_peak_memory_stats=lambda index: log.append(f"reset {index}"),
        max_memory_allocated=lambda index: peaks[index],
        max_memory_reserved=lambda index: 2 << 20,
        empty_cache=lambda: None,
        get_device_properties=lambda index: SimpleNamespace(name="Stand-in GPU"),
    )
    return SimpleNamespace(cuda=cuda)


def test_every_visible_cuda_device_is_synchronized_before_the_clock_is_read() -> None:
    log: list[str] = []
    ticks = iter([1_000, 4_000_000])

    def clock() -> int:
        log.append("clock")
        return next(ticks)

    backend = AllCudaBackend((0, 1), cuda_stand_in(log), clock_ns=clock)
    seconds = backend.time_block(lambda: log.append("step"), 2)
    assert log == [
        "synchronize 0",
        "synchronize 1",
        "clock",
        "step",
        "step",
        "synchronize 0",
        "synchronize 1",
        "clock",
    ]
    assert seconds == pytest.approx(3.999e-3)
    assert backend.describe() == {"device": "cuda", "name": "Stand-in GPU", "count": 2}
    with backend.track_memory() as probe:
        pass
    assert probe.peak_bytes == 900  # the larger device's high-water mark, its 100 B at the start included
    assert probe.transient_bytes == 800 and probe.devices == {"cuda:0": 300, "cuda:1": 900}


def test_mps_events_when_torch_has_them() -> None:
    log: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing

        def record(self) -> None:
            log.append("record")

        def synchronize(self) -> None:
            log.append("synchronize")

        def elapsed_time(self, end: Any) -> float:
            return 4.0

    fake = SimpleNamespace(mps=SimpleNamespace(Event=Event, synchronize=lambda: log.append("mps.synchronize")))
    backend = MpsBackend(torch_module=fake)
    assert backend.time_block(lambda: log.append("call"), 2) == pytest.approx(4e-3)
    assert log == ["mps.synchronize", "record", "call", "call", "record", "synchronize"]


def test_cpu_backend_times_with_the_host_clock() -> None:
    ticks = iter([1_000, 251_000])
    backend = CpuBackend(clock_ns=lambda: next(ticks))
    calls: list[int] = []
    assert backend.time_block(lambda: calls.append(1), 5) == pytest.approx(250e-6)
    assert len(calls) == 5


def test_cpu_transient_memory_sees_a_short_lived_allocation(capfd: pytest.CaptureFixture[str]) -> None:
    # Under filterwarnings=error a warning of torch's profiler would fail this test: the probe keeps them in.
    backend = CpuBackend()
    n = 1 << 20

    def step() -> None:
        a = torch.ones(n)  # 4 MiB, freed when the function returns
        b = a * 2  # another 4 MiB alive at the same time
        del a, b

    with backend.track_memory() as probe:
        for _ in probe.calls():
            step()
    assert probe.transient_bytes is not None, probe.transient_method
    assert 8 * 2**20 <= probe.transient_bytes < 9 * 2**20
    assert probe.transient_method == "torch.profiler CPU allocator events"
    assert "profiler_start" not in capfd.readouterr().err


def test_mps_peak_memory_is_unknown_and_runs_nothing() -> None:
    backend = MpsBackend(torch_module=SimpleNamespace(mps=SimpleNamespace(Event=object)))
    with backend.track_memory() as probe:
        assert list(probe.calls()) == []
    assert probe.peak_bytes is None
    assert probe.reason == "unknown: torch.mps has no peak statistic"


def test_the_cpu_model_is_read_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every CPU measurement names its CPU (``CpuBackend.describe``): /proc/cpuinfo is read for the first only."""
    from pytest_gpuperf.measuring import _devices

    opened: list[str] = []
    real_open = open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", counting_open)
    _devices.cpu_model.cache_clear()
    try:
        names = {CpuBackend().describe()["name"] for _ in range(3)}
    finally:
        _devices.cpu_model.cache_clear()
    assert len(names) == 1 and opened.count("/proc/cpuinfo") <= 1
