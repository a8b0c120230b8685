"""Energy per call: NVML's total-energy counter through the stand-in, RAPL through a fake sysfs tree, and the span of
sampled blocks that a stepping counter can be read over."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_gpuperf.measuring import Measurement, MeasureSettings, SamplingPlan, measure_on
from pytest_gpuperf.measuring._backends import CpuBackend, CudaBackend
from pytest_gpuperf.measuring._clocks import clock_monitor
from pytest_gpuperf.measuring._energy import ENERGY_MAX_ERROR, EnergySummary, EnergyTrace, energy_trace, rapl_counter
from pytest_gpuperf.measuring._reading import Sensor, sensed
from pytest_gpuperf.measuring._sampling import sample
from tests.fake_nvml import FakeNvml, cuda_props, cuda_torch, gpus
from tests.measuring.test_clocks import FakeCudaTorch

# ---------------------------------------------------------------- a counter that steps


def metered(run_block: Callable[[int], float], trace: EnergyTrace, *before: Sensor[object]) -> Callable[[int], float]:
    """``run_block`` with the trace started (as the energy reading opens it) and read after every block, after the
    sensors ``before`` it (the clocks')."""
    trace.start()
    return sensed(run_block, [*before, trace])


class SteppingCounter:
    """A joule counter of a device drawing ``watts``, updated only every ``period`` seconds of the fake clock (as
    NVML's is, 20 to 100 ms apart)."""

    def __init__(self, now: list[float], watts: float, period: float) -> None:
        self.now, self.watts, self.period = now, watts, period

    def __call__(self) -> float:
        updated = int(self.now[0] / self.period) * self.period
        return self.watts * updated


def run(block_seconds: float, gap: float, blocks: int, counter: SteppingCounter, now: list[float]) -> EnergyTrace:
    """``blocks`` blocks of 10 calls, each timed ``block_seconds`` and followed by ``gap`` untimed seconds."""
    trace = EnergyTrace(counter, "fake", clock=lambda: now[0])

    def run_block(iterations: int) -> float:
        now[0] += block_seconds + gap
        return block_seconds

    block = metered(run_block, trace)
    for _ in range(blocks):
        block(10)
    return trace


def test_the_span_is_aligned_to_the_counters_steps() -> None:
    """400 W, a counter stepping every 100 ms, blocks of 10 ms (9 ms timed): no block's own difference means
    anything (0 or 40 J), but the span between the first and last step gives 400 W within one block per end."""
    now = [0.0]
    counter = SteppingCounter(now, watts=400.0, period=0.1)
    trace = run(0.009, 0.001, 205, counter, now)  # 2.05 s of sampled blocks after 0 s of warmup
    summary = trace.summary(205)
    assert summary.note == "" and summary.source == "fake"
    assert summary.watts == pytest.approx(400.0, rel=0.011)
    assert summary.error is not None and summary.error <= 0.011  # 2 blocks of 10 ms against 1.9 s
    # the blocks between the first step (at 0.1 s) and the last (at 2.0 s), one block either way
    assert summary.calls == pytest.approx(10 * 190, abs=10)
    assert summary.joules_per_call == pytest.approx(400.0 * 0.010 / 10, rel=0.05)  # the gaps' share included
    assert summary.timed_seconds == pytest.approx(0.9 * (summary.seconds or 0), rel=0.02)
    assert summary.per_joule(256) == pytest.approx(256 / (summary.joules_per_call or 1))
    assert EnergySummary.from_dict(summary.to_dict()) == summary


def test_a_span_too_short_for_the_counter_gives_no_figure_and_says_why() -> None:
    now = [0.0]
    counter = SteppingCounter(now, watts=400.0, period=0.1)
    short = run(0.009, 0.001, 15, counter, now).summary(15)  # 150 ms: one step at most
    assert short.joules is None and short.joules_per_call is None and short.watts is None
    assert short.note.startswith("the counter stepped 1 time(s) in the 0.15 s of sampled blocks, too few")
    assert short.note.endswith("raise --gpuperf-min-time")
    now = [0.0]
    coarse = run(0.045, 0.005, 7, SteppingCounter(now, 400.0, 0.1), now).summary(7)  # 50 ms blocks: 2 steps
    assert coarse.joules is None and "known to" in coarse.note
    assert ENERGY_MAX_ERROR == 0.1


def test_only_the_sampled_blocks_count() -> None:
    """The warmup's blocks come first and draw 1000 W; the samples' draw 300 W: only theirs count."""
    now, energy, shown = [0.0], [0.0], [0.0]
    watts = [1000.0]
    trace = EnergyTrace(lambda: shown[0], "fake", clock=lambda: now[0])

    def run_block(iterations: int) -> float:
        before = now[0]
        now[0] += 0.005
        energy[0] += watts[0] * 0.005
        if int(now[0] / 0.02) != int(before / 0.02):  # the counter shows its energy every 20 ms
            shown[0] = energy[0]
        return 0.004

    block = metered(run_block, trace)
    for _ in range(40):  # warmup
        block(5)
    watts[0] = 300.0
    for _ in range(200):  # the samples
        block(5)
    assert trace.summary(200).watts == pytest.approx(300.0, rel=0.03)
    assert (trace.summary(240).watts or 0.0) > 400.0  # the warmup's would have counted


# ---------------------------------------------------------------- NVML's counter


def test_nvml_energy_through_the_clock_monitor() -> None:
    """The counter in millijoules, advanced by the blocks; read after each block with the clocks."""
    nvml = FakeNvml(gpus(2))
    gpu = nvml.devices[1]
    now = [0.0]
    backend = CudaBackend(0, cuda_torch([cuda_props(gpu)]))
    with clock_monitor(backend, nvml_module=nvml) as monitor:
        trace = energy_trace(backend, monitor, clock=lambda: now[0])
        assert isinstance(trace, EnergyTrace) and trace.source == "nvml 1 total energy"

        def run_block(iterations: int) -> float:
            now[0] += 0.005
            if int(now[0] / 0.05) != int((now[0] - 0.005) / 0.05):  # a step every 50 ms
                gpu.energy_mj = int(now[0] / 0.05) * 50 * 700  # 700 W
            return 0.004

        plan = SamplingPlan(min_samples=10, min_time=1.0, max_time=2.0, warmup_time=0.05, min_block_time=0.004)
        assert monitor is not None
        result = sample(metered(run_block, trace, monitor), plan, clock=lambda: now[0])
        summary = trace.summary(len(result.samples))
    assert summary.note == "" and summary.watts == pytest.approx(700.0, rel=0.02)
    assert "energy" in nvml.calls


def test_a_gpu_without_the_counter_records_no_figure_and_says_so() -> None:
    nvml = FakeNvml(gpus(1))
    nvml.devices[0].energy_mj = None  # before Volta, or a vGPU
    backend = CudaBackend(0, cuda_torch([cuda_props(nvml.devices[0])]))
    with clock_monitor(backend, nvml_module=nvml) as monitor:
        why = energy_trace(backend, monitor)
    assert why == "this GPU or its driver has no NVML total-energy counter (Volta and later GPUs have one)"
    assert str(energy_trace(backend, None)).startswith("no NVML reading of this GPU")


def test_measure_on_keeps_the_energy_of_its_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through measure_on: the stand-in's counter never steps, so the record says why it has no figure."""
    nvml = FakeNvml(gpus(1))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    torch = FakeCudaTorch(cuda_props(nvml.devices[0]))
    settings = MeasureSettings(min_time=0.001, max_time=0.05, warmup_time=0.005, min_samples=6, memory=False)
    m = measure_on(torch.call, CudaBackend(0, torch_module=torch), settings, name="mm", device="cuda:0", work={})
    assert m.energy is not None and m.energy.joules is None and m.energy.source == "nvml 0 total energy"
    assert m.energy.note.startswith("the counter stepped 0 time(s)")
    assert Measurement.from_dict(m.to_dict()).energy == m.energy


# ---------------------------------------------------------------- RAPL


def zone(root: Path, name: str, label: str, energy: int, top: int = 262_143_328_850) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "name").write_text(label + "\n")
    (path / "energy_uj").write_text(f"{energy}\n")
    (path / "max_energy_range_uj").write_text(f"{top}\n")
    return path


def test_rapl_sums_the_packages_and_undoes_the_wrap_around(tmp_path: Path) -> None:
    one = zone(tmp_path, "intel-rapl:0", "package-0", 262_143_000_000)
    two = zone(tmp_path, "intel-rapl:1", "package-1", 5_000_000)
    zone(tmp_path, "intel-rapl:0:0", "core", 1)  # a part of package 0: not counted twice
    zone(tmp_path, "intel-rapl:2", "psys", 1)  # the platform: it contains the packages
    counter, source = rapl_counter(tmp_path)
    assert counter is not None and source == "rapl package-0+package-1"
    (one / "energy_uj").write_text("671150\n")  # wrapped past 262143328850: 328850 + 671150 = 1 J
    (two / "energy_uj").write_text("7000000\n")  # 2 J
    assert counter() == pytest.approx(3.0)


def test_no_rapl_records_nothing_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert rapl_counter(tmp_path / "absent") == (None, f"no RAPL package zone under {tmp_path / 'absent'}")
    zone(tmp_path, "intel-rapl:0", "package-0", 1)
    real = Path.read_text

    def denied(self: Path, *args: object, **kwargs: object) -> str:
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_text", denied)
    counter, why = rapl_counter(tmp_path)
    assert counter is None and why == f"RAPL's {tmp_path / 'intel-rapl:0' / 'energy_uj'} is readable by root only"
    assert energy_trace(CpuBackend(), None, powercap=tmp_path) == why


def test_a_cpu_measurement_with_readable_rapl_keeps_its_energy(tmp_path: Path) -> None:
    package = zone(tmp_path, "intel-rapl:0", "package-0", 0)
    now = [0.0]
    trace = energy_trace(CpuBackend(), None, clock=lambda: now[0], powercap=tmp_path)
    assert isinstance(trace, EnergyTrace)

    def run_block(iterations: int) -> float:
        now[0] += 0.01
        (package / "energy_uj").write_text(f"{int(now[0] * 65 * 1e6)}\n")  # 65 W, stepping every reading
        return 0.01

    block = metered(run_block, trace)
    for _ in range(30):
        block(4)
    summary = trace.summary(30)
    assert summary.watts == pytest.approx(65.0) and summary.joules_per_call == pytest.approx(65.0 * 0.01 / 4)
    assert summary.source == "rapl package-0"
