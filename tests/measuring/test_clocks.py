"""The clock monitor through a stand-in pynvml: which NVML device, throttled or not, the summary, the wiring."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_gpuperf.measuring import (
    ClockSummary,
    Measurement,
    MeasureSettings,
    SamplingPlan,
    Step,
    match_nvml_device,
    measure_on,
    measure_paired,
    throttle_names,
)
from pytest_gpuperf.measuring._backends import CpuBackend, CudaBackend
from pytest_gpuperf.measuring._clocks import CLOCKS, ClockMonitor, ClockReading, clock_monitor, same_uuid
from pytest_gpuperf.measuring._reading import sensed
from pytest_gpuperf.measuring._sampling import sample
from tests.fake_nvml import FakeGpu, FakeNvml, cuda_props, cuda_torch, gpus

# ---------------------------------------------------------------- which NVML device


class CUuuid:
    """torch's ``props.uuid`` is an object whose str() is the bare UUID."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def test_a_remapped_cuda_device_is_found_by_uuid_not_by_index() -> None:
    """CUDA_VISIBLE_DEVICES=5: CUDA's device 0 is NVML's device 5."""
    nvml = FakeNvml(gpus(8))
    match = match_nvml_device(nvml, cuda_props(nvml.devices[5]))
    assert match is not None and (match.index, match.how) == (5, "uuid") and match.handle is nvml.devices[5]


@pytest.mark.parametrize("form", ["bytes", "object", "upper"])
def test_uuid_forms_match(form: str) -> None:
    nvml = FakeNvml(gpus(3))
    props = cuda_props(nvml.devices[2])
    text = str(nvml.devices[2].uuid)
    if form == "bytes":
        nvml.devices[2].uuid = text.encode()
    elif form == "object":
        props.uuid = CUuuid(props.uuid)
    else:
        props.uuid = props.uuid.upper()
    match = match_nvml_device(nvml, props)
    assert match is not None and match.index == 2


def test_same_uuid_ignores_nvmls_prefix_only() -> None:
    assert same_uuid("3edc53b4-aa", "GPU-3edc53b4-aa") and same_uuid(b"GPU-3edc53b4-aa", "3EDC53B4-AA")
    assert not same_uuid("3edc53b4-aa", "GPU-3edc53b4-ab") and not same_uuid(None, "GPU-x") and not same_uuid("", "")


def test_without_a_uuid_the_pci_bus_id_decides() -> None:
    nvml = FakeNvml(gpus(4))
    match = match_nvml_device(nvml, cuda_props(nvml.devices[3], uuid=False))
    assert match is not None and (match.index, match.how) == (3, "pci bus id")


def test_a_device_nvml_does_not_know_is_unmatched_never_guessed_by_index() -> None:
    nvml = FakeNvml(gpus(2))
    stranger = FakeGpu("GPU-99999999-0000-0000-0000-000000000000", (0, 42, 0))
    assert match_nvml_device(nvml, cuda_props(stranger)) is None
    assert match_nvml_device(nvml, SimpleNamespace(name="old torch, no uuid or bus id")) is None


# ---------------------------------------------------------------- throttled or not


def reading(sm: int = 1980, reasons: int = 0) -> ClockReading:
    return ClockReading(sm_clock_mhz=sm, mem_clock_mhz=2619, temperature_c=60, power_w=500.0, reasons=reasons)


@pytest.mark.parametrize(
    ("sm", "reasons", "throttled"),
    [
        (1980, 0, False),
        (1485, 0, False),  # exactly 0.75 of the reference 1980: not below the threshold
        (1484, 0, True),  # a dip below 0.75 of the clock the measurement ran at
        (1980, 0x4, False),  # the power cap alone is recorded, not a throttle
        (1980, 0x1, False),  # idle
        (1980, 0x2, False),  # application clocks (locked clocks)
        (1980, 0x8, True),  # hw_slowdown
        (1980, 0x20, True),  # sw_thermal_slowdown
        (1980, 0x40, True),  # hw_thermal_slowdown
        (1980, 0x80, True),  # hw_power_brake_slowdown
    ],
)
def test_throttled_is_a_slowdown_reason_or_a_dip_below_the_reference(sm: int, reasons: int, throttled: bool) -> None:
    assert reading(sm, reasons).throttled(1980) is throttled


@pytest.mark.parametrize(
    ("state", "sm", "reasons"),
    [("power-capped", 1425, 0x4), ("locked", 1200, 0x2), ("locked and capped", 1000, 0x2 | 0x4)],
)
def test_a_power_cap_or_locked_clocks_are_the_normal_state_not_throttling(state: str, sm: int, reasons: int) -> None:
    """The issue's figure: a bf16 GEMM keeps an H100 at 1425 of 1980 MHz (0.72) with only sw_power_cap set; main
    flagged all 41 samples throttled (below 0.75 of the maximum), as it did clocks locked at 1200 MHz. The
    reference is now the measurement's own median SM clock."""
    summary = ClockSummary.of([reading(sm, reasons)] * 41, 1980)
    assert summary is not None and summary.throttled == 0 and summary.sm_clock_mhz_median == sm
    # A dip below 0.75 of that state is still flagged.
    dipped = ClockSummary.of([reading(sm, reasons)] * 38 + [reading(int(sm * 0.7), reasons)] * 3, 1980)
    assert dipped is not None and dipped.throttled_samples == (38, 39, 40)


def test_without_a_reference_clock_only_the_reasons_say_throttled() -> None:
    assert not reading(300).throttled(None)
    assert reading(300, 0x8).throttled(None)
    assert reading(1600).throttled(1980, threshold=0.9)


def test_throttle_names_keep_unknown_bits() -> None:
    assert throttle_names(0) == []
    assert throttle_names(0x1 | 0x8 | 0x10000) == ["gpu_idle", "hw_slowdown", "0x10000"]


# ---------------------------------------------------------------- the summary


def test_summary_of_the_samples_readings() -> None:
    readings = [reading(1980), None, reading(1300, 0x4), reading(1900, 0x20), reading(1700)]
    summary = ClockSummary.of(readings, 1980, source="nvml 5 (uuid)")
    assert summary is not None
    assert summary.readings == 4  # NVML did not answer once
    assert (summary.sm_clock_mhz_min, summary.sm_clock_mhz_median, summary.sm_clock_mhz_max) == (1300, 1800, 1980)
    assert (summary.mem_clock_mhz_min, summary.mem_clock_mhz_max) == (2619, 2619)
    assert summary.temperature_c_max == 60 and summary.power_w_max == 500.0
    assert summary.reasons == ("sw_power_cap", "sw_thermal_slowdown")
    # 1300 is below 0.75 of the median 1800 (1350); 1900 has a slowdown reason. Indices of the samples.
    assert summary.throttled_samples == (2, 3) and summary.throttled == 2
    assert ClockSummary.from_dict(summary.to_dict()) == summary
    assert ClockSummary.of([None, None], 1980) is None
    assert ClockSummary.from_dict(None) is None


# ---------------------------------------------------------------- the monitor and its wrapper


def test_monitor_reads_five_nvml_calls_and_keeps_each_reading() -> None:
    nvml = FakeNvml(gpus(2))
    with clock_monitor(CudaBackend(0, cuda_torch([cuda_props(nvml.devices[1])])), nvml_module=nvml) as monitor:
        assert monitor is not None and monitor.match.index == 1 and monitor.max_sm_clock_mhz == 1980
        nvml.calls.clear()
        nvml.devices[1].sm_clock_mhz, nvml.devices[1].reasons = 1000, 0x4
        got = monitor.read()
        assert got == ClockReading(1000, 2619, 40, 300.0, 0x4)
        assert nvml.calls == ["reasons", "clock", "clock", "temperature", "power"]
        assert monitor.readings == [got]
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_the_monitor_reads_after_every_block_and_the_summary_covers_the_samples_only() -> None:
    """Warmup blocks come first; the last len(samples) readings are the samples', in order."""
    nvml = FakeNvml(gpus(1))
    gpu = nvml.devices[0]
    match = match_nvml_device(nvml, cuda_props(gpu))
    assert match is not None
    monitor = ClockMonitor(nvml, match, 1980)
    now = [0.0]
    blocks: list[int] = []

    def run_block(iterations: int) -> float:
        blocks.append(iterations)
        gpu.sm_clock_mhz = 1000 if len(blocks) % 4 == 0 else 1980  # every 4th block ran throttled
        now[0] += 0.01
        return 0.002 * iterations

    plan = SamplingPlan(min_samples=10, min_time=0.0, max_time=0.5, warmup_time=0.05, min_block_time=0.004)
    result = sample(sensed(run_block, [monitor]), plan, clock=lambda: now[0])
    assert len(monitor.readings) == len(blocks) == result.warmup.blocks + len(result.samples)
    summary = monitor.summary(len(result.samples))
    assert summary is not None and summary.readings == len(result.samples)
    first = result.warmup.blocks  # block index (from 0) of the first sample
    expected = tuple(i for i in range(len(result.samples)) if (first + i + 1) % 4 == 0)
    assert summary.throttled_samples == expected and expected
    assert summary.source == "nvml 0 (uuid)"


@pytest.mark.parametrize("unsupported", ["power", "temperature", "reasons", "clock"])
def test_each_nvml_field_fails_alone(unsupported: str) -> None:
    """Power on a vGPU, a field a MIG instance does not report: on main one unsupported call lost the whole
    reading (``readings == [None]``, no summary); now only its field is None."""
    nvml = FakeNvml(gpus(1), failing=frozenset({unsupported}))
    nvml.devices[0].reasons = 0x20
    with clock_monitor(CudaBackend(0, cuda_torch([cuda_props(nvml.devices[0])])), nvml_module=nvml) as monitor:
        assert monitor is not None
        block = sensed(lambda k: 0.001 * k, [monitor])
        assert block(3) == pytest.approx(0.003)
        (got,) = monitor.readings
        summary = monitor.summary(1)
    assert got is not None and summary is not None
    fields = {"power": "power_w", "temperature": "temperature_c", "reasons": "reasons", "clock": "sm_clock_mhz"}
    lost = {
        name
        for name in ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "reasons")
        if getattr(got, name) is None
    }
    assert lost == ({"sm_clock_mhz", "mem_clock_mhz"} if unsupported == "clock" else {fields[unsupported]})
    assert summary.throttled == (0 if unsupported == "reasons" else 1)
    assert ClockSummary.from_dict(summary.to_dict()) == summary


def test_a_reading_nvml_answers_nothing_of_is_lost_not_the_measurement() -> None:
    everything = frozenset({"power", "temperature", "reasons", "clock"})
    nvml = FakeNvml(gpus(1), failing=everything)
    with clock_monitor(CudaBackend(0, cuda_torch([cuda_props(nvml.devices[0])])), nvml_module=nvml) as monitor:
        assert monitor is not None
        block = sensed(lambda k: 0.001 * k, [monitor])
        assert block(3) == pytest.approx(0.003)
        assert monitor.readings == [None] and monitor.summary(1) is None
    assert nvml.shutdowns == 1


def test_no_monitor_without_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with clock_monitor(CudaBackend(0, cuda_torch([cuda_props(gpus(1)[0])]))) as monitor:
        assert monitor is None

    def run_block(iterations: int) -> float:
        return 1.0

    assert sensed(run_block, []) is run_block


def test_no_monitor_when_nvml_does_not_start() -> None:
    nvml = FakeNvml(gpus(1), fail_init=True)
    with clock_monitor(CudaBackend(0, cuda_torch([cuda_props(nvml.devices[0])])), nvml_module=nvml) as monitor:
        assert monitor is None
    assert nvml.shutdowns == 0


def test_no_monitor_for_an_unmatched_device_or_a_cpu() -> None:
    nvml = FakeNvml(gpus(2))
    stranger = cuda_props(FakeGpu("GPU-99999999-0000-0000-0000-000000000000", (0, 42, 0)))
    with clock_monitor(CudaBackend(0, cuda_torch([stranger])), nvml_module=nvml) as monitor:
        assert monitor is None
    assert (nvml.inits, nvml.shutdowns) == (1, 1)
    with clock_monitor(CpuBackend(), nvml_module=nvml) as monitor:
        assert monitor is None
    assert nvml.inits == 1, "a CPU measurement never starts NVML"


# ---------------------------------------------------------------- wired into measure_on and measure_paired


class FakeCudaTorch:
    """torch.cuda for CudaBackend: events count the calls made between them, 0.5 ms each."""

    def __init__(self, props: SimpleNamespace) -> None:
        self.calls = 0
        outer = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.at = 0

            def record(self, stream: Any = None) -> None:
                self.at = outer.calls

            def synchronize(self) -> None:
                return None

            def elapsed_time(self, end: Event) -> float:
                return 0.5 * (end.at - self.at)

        class Stream:
            def synchronize(self) -> None:
                return None

        class Device:
            def __init__(self, index: int) -> None:
                return None

            def __enter__(self) -> None:
                return None

            def __exit__(self, *args: object) -> None:
                return None

        self.cuda = SimpleNamespace(
            Event=Event,
            device=Device,
            current_stream=lambda index: Stream(),
            synchronize=lambda index=None: None,
            get_device_properties=lambda index: props,
        )

    def call(self) -> None:
        self.calls += 1


SHORT = MeasureSettings(min_time=0.001, max_time=0.05, warmup_time=0.005, min_samples=6, memory=False)


def test_measure_on_a_cuda_backend_keeps_the_clock_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml(gpus(6))
    nvml.devices[5].reasons = 0x40  # hw_thermal_slowdown through the whole measurement
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    torch = FakeCudaTorch(cuda_props(nvml.devices[5]))
    backend = CudaBackend(0, torch_module=torch)
    m = measure_on(torch.call, backend, SHORT, name="mm", device="cuda:0", work={"FLOP": 1e9})
    assert m.clocks is not None and m.clocks.readings == len(m.samples)
    assert m.clocks.throttled_samples == tuple(range(len(m.samples))) and m.clocks.source == "nvml 5 (uuid)"
    assert m.clocks.reasons == ("hw_thermal_slowdown",)
    assert (nvml.inits, nvml.shutdowns) == (1, 1)
    again = Measurement.from_dict(m.to_dict())
    assert again.clocks == m.clocks


def test_measure_paired_shares_one_reading_per_round(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml(gpus(1))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    torch = FakeCudaTorch(cuda_props(nvml.devices[0]))

    def twice() -> None:
        torch.call()
        torch.call()

    steps = {"a": Step(torch.call, work={"items": 1}), "b": Step(twice, work={"items": 1})}
    paired = measure_paired(steps, CudaBackend(0, torch_module=torch), SHORT, device="cpu")
    a, b = paired.measurements["a"].clocks, paired.measurements["b"].clocks
    assert a is not None and a == b and a.readings == len(paired.times["a"]) and a.throttled == 0


def test_measurements_on_a_cpu_or_from_older_files_have_no_clocks() -> None:
    m = measure_on(lambda: None, CpuBackend(), SHORT, name="cpu", device="cpu", work={})
    assert m.clocks is None
    data = m.to_dict()
    assert data["clocks"] is None
    del data["clocks"]
    assert Measurement.from_dict(data).clocks is None


# ---------------------------------------------------------------- what the reasons list (F7)


def test_gpu_idle_is_no_reason_a_record_lists() -> None:
    """NVML is read after each block, once it was synchronized: on the drained GPU ``gpu_idle`` (no work runs, the
    clocks fall toward idle) is set in most readings, so it was listed in nearly every record's reasons. It is no
    slowdown: it is left out; the other reasons stay."""
    summary = ClockSummary.of([reading(1980, 0x1), reading(1900, 0x1 | 0x4), reading(1980, 0x1 | 0x10)], 1980)
    assert summary is not None and summary.reasons == ("sw_power_cap", "sync_boost")
    assert ClockSummary.of([reading(1980, 0x1)] * 3, 1980) == ClockSummary.of([reading(1980, 0)] * 3, 1980)
    assert summary.throttled == 0


def test_a_measurement_on_a_drained_gpu_lists_only_what_slowed_it(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml(gpus(1))
    nvml.devices[0].reasons = 0x1 | 0x4  # idle after the block's sync, and power-capped
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    torch = FakeCudaTorch(cuda_props(nvml.devices[0]))
    m = measure_on(torch.call, CudaBackend(0, torch_module=torch), SHORT, name="mm", device="cuda:0", work={})
    assert m.clocks is not None and m.clocks.reasons == ("sw_power_cap",)
    (facts,) = CLOCKS.facts(m)
    assert facts[1].endswith("; reasons seen: sw_power_cap")


def test_a_record_written_before_lists_gpu_idle_no_more() -> None:
    """Files written before this release list ``gpu_idle``; read back, their reasons are what a record lists now."""
    old = ClockSummary.of([reading(1980, 0x4)], 1980)
    assert old is not None
    data = {**old.to_dict(), "reasons": ["gpu_idle", "sw_power_cap"]}
    assert ClockSummary.from_dict(data) == old
