"""Issue 34, item 4: timing a step cannot fool. Each planted cheat is flagged on the row and kept in the JSON, and
an honest step is not: work on a side stream the current stream never waits for (on the stand-in GPU), a result
cached after the first call (a real CPU step), a rate above the datasheet (a read served from cache)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import pytest_gpuperf
from pytest_gpuperf.gate import compare_runs, gate_lines
from pytest_gpuperf.measuring import (
    TIMING_CHECKS,
    Around,
    Measurement,
    MeasureSettings,
    Step,
    measure_on,
    measure_paired,
    timing_flags,
)
from pytest_gpuperf.measuring._backends import CpuBackend, CudaBackend
from pytest_gpuperf.measuring._memory import MemoryReading
from pytest_gpuperf.measuring._timing_checks import (
    DRAIN_SHARE,
    Counted,
    Drain,
    Peak,
    TimingChecks,
    datasheet_peaks,
    why_uncounted,
)
from pytest_gpuperf.report import render
from pytest_gpuperf.results import Record, flag_legend, flags, results_table, table_notes
from tests.synthetic import make_measurement, make_record, make_run, samples_around

from .fake_gpu import FakeGpu, plain_loop, step

#: These tests check what the profile reads, not its budget: a busy machine's slow reading must not reduce it.
pytestmark = pytest.mark.usefixtures("whole_profile")

FAST = MeasureSettings(max_time=0.5, min_time=0.02, warmup_time=0.02, memory=False)
ROUNDS = MeasureSettings(max_time=1.0, min_time=0.05, warmup_time=0.05, min_samples=10, memory=False)
#: The real CPU steps: short, and profiled (the profile counts the later calls).
CPU: dict[str, Any] = {"max_time": 0.3, "min_time": 0.02, "warmup_time": 0.02, "memory": False}
H100 = "NVIDIA H100 80GB HBM3"


def backend_on(gpu: FakeGpu) -> CudaBackend:
    return CudaBackend(0, torch_module=gpu.torch(), clock=gpu.clock)


def measured(fn: Callable[[], object], gpu: FakeGpu, work: dict[str, float] | None = None) -> Measurement:
    return measure_on(fn, backend_on(gpu), FAST, name="step", device="cuda:0", work=work or {}, clock=gpu.clock)


def row(m: Measurement) -> str:
    """The record's flags, as its row in the results table shows them."""
    return flags(dataclasses.replace(make_record(1e-3), measurement=m))


def stored(m: Measurement) -> Measurement:
    """``m`` written to JSON and read back."""
    return Measurement.from_dict(json.loads(json.dumps(m.to_dict())))


# ---------------------------------------------------------------- device work after the end event


def side_stream_step(gpu: FakeGpu, *, joined: bool) -> Callable[[], None]:
    """200 us on the current stream and 800 us on a side stream; ``joined``: the streams wait for each other
    (``side.wait_stream(current)`` before, ``current.wait_stream(side)`` after), as a step that uses a side stream
    must."""

    def fn() -> None:
        gpu.kernel("own", 200e-6)
        if joined:
            gpu.side_end = max(gpu.side_end, gpu.stream_end)
        gpu.side_kernel("hidden", 800e-6)
        if joined:
            gpu.stream_end = max(gpu.stream_end, gpu.side_end)

    return fn


def test_work_on_a_side_stream_the_current_stream_never_waits_for_is_flagged() -> None:
    gpu = FakeGpu()
    m = measured(side_stream_step(gpu, joined=False), gpu)
    # The event pair sees the current stream's 200 us only, while the device is busy 800 us a call.
    assert m.median == pytest.approx(200e-6, rel=0.01)
    assert "device work after end event (" in row(m)
    drain = stored(m).to_dict()["timing_checks"]["drain"]
    assert drain["blocks"] == len(m.samples) and drain["share"] > 2 and not drain["rounds"]
    assert row(stored(m)) == row(m)


def test_a_joined_side_stream_and_an_honest_step_are_not_flagged_and_the_drain_is_outside_the_time() -> None:
    gpu = FakeGpu()
    joined = measured(side_stream_step(gpu, joined=True), gpu)
    assert joined.median == pytest.approx(1e-3, rel=0.01)  # the side stream's 800 us, the current stream behind it
    gpu = FakeGpu()
    loop = plain_loop(gpu, step(gpu, 30e-6, [100e-6] * 10))
    gpu = FakeGpu()
    honest = measured(step(gpu, 30e-6, [100e-6] * 10), gpu)
    assert honest.median == pytest.approx(loop, rel=1e-3)
    for m in (joined, honest):
        checks = m.timing_checks
        assert checks is not None and checks.drain is not None
        assert checks.drain.wait == 0.0 and checks.drain.blocks == len(m.samples)
        assert row(m) == ""


def test_paired_rounds_with_a_step_that_leaves_work_behind_are_flagged_as_rounds() -> None:
    gpu = FakeGpu()
    steps = {"cheat": Step(side_stream_step(gpu, joined=False), {}), "honest": Step(step(gpu, 0.0, [300e-6]), {})}
    rounds = measure_paired(steps, backend_on(gpu), ROUNDS, device="cuda:0")
    for m in rounds.measurements.values():
        assert "device work after end event in its paired rounds (" in row(m)
    gpu = FakeGpu()
    steps = {"a": Step(step(gpu, 0.0, [200e-6]), {}), "b": Step(step(gpu, 0.0, [300e-6]), {})}
    rounds = measure_paired(steps, backend_on(gpu), ROUNDS, device="cuda:0")
    assert [row(m) for m in rounds.measurements.values()] == ["", ""]


def test_the_drain_is_flagged_only_above_its_share_and_floor() -> None:
    quick = Drain(blocks=10, wait=10e-6, share=0.5, longest=10e-6)  # a 20 us block: below the floor
    small = Drain(blocks=10, wait=1e-3, share=DRAIN_SHARE / 2, longest=1e-3)
    assert not quick.flagged and not small.flagged
    assert Drain(blocks=10, wait=1e-3, share=2 * DRAIN_SHARE, longest=1e-3).flagged


# ---------------------------------------------------------------- work that falls after the first call


A = torch.randn(96, 96)


def cached(compute: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``compute`` once, its result returned from then on (a cheat: the later calls do nothing)."""
    kept: list[torch.Tensor] = []

    def fn() -> torch.Tensor:
        if not kept:
            kept.append(compute())
        return kept[0]

    return fn


def matmul() -> torch.Tensor:
    return A @ A


def elementwise() -> torch.Tensor:
    return (A * 2 + 1).relu_()


def test_a_matmul_cached_after_its_first_call_is_flagged() -> None:
    m = pytest_gpuperf.measure(cached(matmul), name="cached", **CPU)
    assert m.profile is not None and m.profile.flops == 0  # what the later calls do
    assert "work fell after first call (1.769 M FLOP -> 0 FLOP, ops 1 -> 0/call)" in row(m)
    assert stored(m).to_dict()["timing_checks"]["first_call"] == {"ops": 1, "flops": 2 * 96**3}
    assert row(stored(m)) == row(m)


def test_a_step_without_flops_cached_after_its_first_call_is_flagged_by_its_ops() -> None:
    m = pytest_gpuperf.measure(cached(elementwise), name="cached", **CPU)
    assert "work fell after first call (ops 3 -> 0/call)" in row(m)


def test_honest_steps_are_not_flagged_a_fresh_optimizers_first_step_included() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.Adam(model.parameters())
    x = torch.randn(16, 32)

    def train() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        optimizer.step()  # the first call also makes the optimizer's state: more ops than the later ones

    for fn in (matmul, elementwise, train):
        m = pytest_gpuperf.measure(fn, name="honest", **CPU)
        checks = m.timing_checks
        assert checks is not None and checks.first_call is not None and checks.first_call.ops > 0
        assert timing_flags(m) == []  # the row's other flags follow the machine's load


def test_a_compiled_step_whose_first_call_is_counted_is_compiled_all_the_same() -> None:
    """A first call under a dispatch mode that does not step aside for torch.compile is never compiled: the step
    would be timed eager."""
    from torch._dynamo.utils import counters

    compiled = torch.compile(lambda: (A @ A).relu(), backend="eager")
    before = counters["frames"]["ok"]
    m = pytest_gpuperf.measure(compiled, name="compiled", **CPU)
    assert counters["frames"]["ok"] == before + 1
    checks = m.timing_checks
    assert checks is not None and checks.first_call is not None and timing_flags(m) == []


def test_where_the_first_call_is_not_counted_it_says_why() -> None:
    backend = CpuBackend()
    assert why_uncounted(Around(backend, FAST)) == ""
    compiling = {"torch", "torch._dynamo"}
    assert why_uncounted(Around(backend, FAST), compiling, compile_aware=False).startswith("torch.compile")
    assert why_uncounted(Around(backend, FAST), compiling, compile_aware=True) == ""
    assert why_uncounted(Around(backend, FAST, paired=True)).startswith("paired rounds")
    assert why_uncounted(Around(backend, FAST.with_values({"mode": "cold"}))).startswith("cold mode")
    m = pytest_gpuperf.measure(cached(matmul), name="cold", mode="cold", **CPU)
    checks = m.timing_checks
    assert checks is not None and checks.first_call is None and checks.uncounted.startswith("cold mode")
    assert stored(m).to_dict()["timing_checks"]["uncounted"] == checks.uncounted and "work fell" not in row(m)


# ---------------------------------------------------------------- a rate above the datasheet


def reads(gpu: FakeGpu, nbytes: float, bandwidth: float) -> Callable[[], None]:
    """One kernel that reads ``nbytes`` at ``bandwidth`` B/s: from memory, or from a cache (a persisting-L2
    window), which reads faster than the memory can."""
    return step(gpu, 0.0, [nbytes / bandwidth])


@pytest.fixture
def shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The expectations file shipped with the suites, whatever the environment names."""
    monkeypatch.delenv("GPUPERF_EXPECTATIONS", raising=False)


@pytest.mark.usefixtures("shipped")
def test_a_read_served_from_cache_above_the_memory_bandwidth_is_flagged() -> None:
    gpu = FakeGpu(name=H100)
    cached_read = measured(reads(gpu, 256 << 20, 14e12), gpu, {"B": float(256 << 20)})  # a 32 MiB window, 8 times
    assert "above datasheet (14 TB/s > 3.35 TB/s)" in row(cached_read)
    peaks = stored(cached_read).to_dict()["timing_checks"]["peaks"]
    assert {"unit": "B/s", "peak": 3.35e12, "what": "H100 80GB HBM3 datasheet bandwidth_d2d_copy 3.35 TB/s"} in peaks
    gpu = FakeGpu(name=H100)
    from_memory = measured(reads(gpu, 1 << 30, 3.2e12), gpu, {"B": float(1 << 30)})
    assert row(from_memory) == ""


@pytest.mark.usefixtures("shipped")
def test_a_flop_rate_above_the_fastest_datasheet_peak_is_flagged() -> None:
    gpu = FakeGpu(name=H100)
    m = measured(step(gpu, 0.0, [1e-3]), gpu, {"FLOP": 1.2e12})  # 1.2 PFLOP/s: no dense figure is that high
    assert "above datasheet (1.2 PFLOP/s > 989 TFLOP/s)" in row(m)
    gpu = FakeGpu(name=H100)
    assert row(measured(step(gpu, 0.0, [1e-3]), gpu, {"FLOP": 0.9e12})) == ""


@pytest.mark.usefixtures("shipped")
def test_a_key_that_covers_parts_of_different_bandwidths_is_held_to_the_highest() -> None:
    """The A100 entry lists 1555 GB/s (the 40 GB part), the floor every A100 clears; its ceiling is 2039 GB/s."""
    (peak,) = [p for p in datasheet_peaks(backend_on(FakeGpu(name="NVIDIA A100-SXM4-80GB"))) if p.unit == "B/s"]
    assert peak.value == 2039e9
    assert datasheet_peaks(backend_on(FakeGpu())) == ()  # "Fake H100": no entry
    assert datasheet_peaks(CpuBackend()) == ()


def test_a_step_on_several_devices_is_held_to_as_many_ceilings() -> None:
    peak = Peak("FLOP/s", 1e14, "a datasheet")
    checks = TimingChecks(peaks=(peak,))
    one = make_measurement("t", samples_around(1e-3), work={"FLOP": 1.5e11}, timing_checks=checks)
    assert row(one) == "above datasheet (150 TFLOP/s > 100 TFLOP/s)"
    two = dataclasses.replace(one).with_reading(
        pytest_gpuperf.measuring.MEMORY, MemoryReading(1, "x", devices={"cuda:0": 1, "cuda:1": 1})
    )
    assert row(two) == ""


# ---------------------------------------------------------------- the table, the report and the gate


def flagged_record(test: str = "t.py::test_step[cpu]") -> Record:
    record = make_record(1e-3, test=test)
    checks = TimingChecks(Drain(41, 2e-3, 2.0, 3e-3), Counted(3, 0))
    return dataclasses.replace(record, measurement=record.measurement.with_reading(TIMING_CHECKS, checks))


def test_the_table_and_the_report_show_the_flag_and_the_note() -> None:
    flagged, honest = flagged_record(), make_record(1e-3, test="t.py::test_b")
    lines = results_table([flagged, honest]).splitlines()
    assert lines[2].endswith(" device work after end event")  # in full under the table
    assert "device work after end event" not in lines[3]
    assert flag_legend([flagged, honest]) == [
        "flags in full:",
        "  test_step: device work after end event (2 ms/block, 200%)",
    ]
    notes = table_notes([flagged, honest], {})
    assert notes == [
        "timing checks: 1 of 2 records flagged; their times may not be what a loop of the step pays "
        "(docs/limitations.md, section 'Timing a step can fool')"
    ]
    html = render(make_run(flagged, honest))
    assert "<dt>timing checks</dt>" in html and "flagged: device work after end event" in html


def test_the_gate_says_a_flagged_rows_times_may_be_wrong_and_fails_nothing_for_it() -> None:
    base = [make_run(make_record(1e-3)) for _ in range(3)]
    result = compare_runs(base, [make_run(flagged_record("test_x.py::test_step[cpu]"))])
    (gated,) = result.rows
    change: Any = gated.changes["timing_checks"]
    assert change.to_dict(result.fail_on) == {"base": [], "head": ["device work after end event (2 ms/block, 200%)"]}
    assert not result.failed and gated.work_failing(result.fail_on) == []
    expected = (
        "test_step [cpu]: timing checks flagged it, its times and ratio may be wrong: "
        "head: device work after end event (2 ms/block, 200%)"
    )
    assert expected in gate_lines(result)
    assert "timing_checks" not in compare_runs(base, base).rows[0].changes


def test_a_file_without_the_checks_reads_back_without_them(tmp_path: Path) -> None:
    data = make_record(1e-3).measurement.to_dict()
    data.pop("timing_checks", None)
    assert Measurement.from_dict(data).timing_checks is None
