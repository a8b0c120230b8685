"""The work profile of a step (``measuring/_profile.py``): real torch on the CPU for ops, FLOPs and bytes; a fake
event list for what only CUDA shows (kernels, runtime calls, host-device synchronizations)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
import torch

from pytest_gpuperf.measuring import Measurement, MeasureSettings, SettingError, WorkProfile, measure
from pytest_gpuperf.measuring._profile import MAX_CALLS, compile_counters, profile_step, read_events

N = 32
FAST: dict[str, Any] = {"min_time": 0.005, "max_time": 0.2, "warmup_time": 0.01, "memory": False}


def two_matmuls() -> object:
    a = torch.ones(N, N)
    return (a @ a) @ a


def test_a_step_of_two_matmuls_counts_two_mm_per_call_and_their_flops_and_bytes() -> None:
    a = torch.ones(N, N)
    profile = profile_step(lambda: (a @ a) @ a, level="full", step_seconds=1e-6, budget=10.0, on_cuda=False)
    assert profile is not None
    assert profile.calls == MAX_CALLS  # a generous budget: the cap
    ops = {op.name: op for op in profile.ops}
    assert ops["aten::mm"].count == 2 * profile.calls
    assert ops["aten::mm"].seconds is not None and ops["aten::mm"].seconds > 0
    assert profile.per_call_counts()["op:aten::mm"] == 2
    assert profile.flops == 2 * (2 * N**3)  # two N x N x N products, per call
    assert profile.per_call_counts()["bytes_allocated"] == 2 * N * N * 4  # each product's float32 result
    assert profile.syncs == {} and profile.kernels == () and profile.bytes_copied == {}  # nothing of a GPU's
    assert profile.seconds > 0 and profile.budget == 10.0


def test_counts_profile_one_call_and_keep_no_times() -> None:
    profile = profile_step(two_matmuls, level="counts", step_seconds=1e-6, budget=10.0, on_cuda=False)
    assert profile is not None and profile.calls == 1
    assert all(op.seconds is None for op in profile.ops)
    assert {op.name: op.count for op in profile.ops}["aten::mm"] == 2


def test_off_profiles_nothing() -> None:
    calls: list[int] = []
    assert profile_step(lambda: calls.append(1), level="off", step_seconds=1.0, budget=1.0, on_cuda=False) is None
    assert calls == []


def test_per_call_counts_are_exact_whatever_the_number_of_calls() -> None:
    one = profile_step(two_matmuls, level="counts", step_seconds=1e-6, budget=10.0, on_cuda=False)
    five = profile_step(two_matmuls, level="full", step_seconds=1e-6, budget=10.0, on_cuda=False)
    assert one is not None and five is not None and five.calls == MAX_CALLS
    assert one.per_call_counts() == five.per_call_counts()


def test_the_budget_bounds_the_calls_profiled() -> None:
    """A fake clock: each call of the step costs 10 ms; a budget of 35 ms allows the counting call and two
    profiled calls, and the profile says what it cost."""
    now = [0.0]

    def step() -> None:
        now[0] += 0.010

    profile = profile_step(step, level="full", step_seconds=0.010, budget=0.035, on_cuda=False, clock=lambda: now[0])
    assert profile is not None
    assert profile.calls == 2
    assert profile.seconds == pytest.approx(0.030)
    assert profile.seconds <= profile.budget


def test_one_call_is_profiled_even_when_it_costs_more_than_the_budget() -> None:
    now = [0.0]

    def step() -> None:
        now[0] += 1.0

    profile = profile_step(step, level="full", step_seconds=1.0, budget=0.01, on_cuda=False, clock=lambda: now[0])
    assert profile is not None and profile.calls == 1
    assert profile.seconds == pytest.approx(2.0) and profile.seconds > profile.budget  # said, not hidden


def test_copies_between_host_and_another_device_are_counted_by_direction() -> None:
    """The meta device stands in for a GPU: a copy to it leaves the host (the stand-in moves no bytes, but the
    counter reads the source's size, as it would for a copy to CUDA)."""
    t = torch.ones(100)
    profile = profile_step(lambda: t.to("meta"), level="counts", step_seconds=1e-6, budget=1.0, on_cuda=False)
    assert profile is not None
    assert profile.bytes_copied == {"htod": 400}


@dataclass(frozen=True)
class Event:
    """A stand-in for one of torch.profiler's events (``FunctionEvent``): what ``read_events`` reads."""

    name: str
    device_type: str = "DeviceType.CPU"
    self_cpu_time_total: float = 0.0
    device_time_total: float = 0.0
    self_cpu_memory_usage: int = 0
    self_device_memory_usage: int = 0


def cuda(name: str, us: float = 0.0) -> Event:
    return Event(name, device_type="DeviceType.CUDA", device_time_total=us)


def test_kernels_runtime_calls_and_each_kind_of_synchronization_are_counted_apart() -> None:
    """What a CUDA step with ``.item()``, ``torch.cuda.synchronize()`` and an event wait shows the profiler."""
    events = [
        Event("aten::mm", self_cpu_time_total=5.0, self_device_memory_usage=4096),
        Event("cudaLaunchKernel"),
        cuda("ampere_sgemm_32x32", 20.0),
        Event("aten::mm", self_cpu_time_total=7.0),
        Event("cudaLaunchKernel"),
        cuda("ampere_sgemm_32x32", 22.0),
        Event("aten::_local_scalar_dense", self_cpu_time_total=3.0),
        Event("cudaMemcpyAsync"),
        cuda("Memcpy DtoH (Device -> Pageable)", 1.0),
        Event("cudaStreamSynchronize"),
        Event("cudaDeviceSynchronize"),
        Event("cudaEventSynchronize"),
        Event("[memory]", self_device_memory_usage=-4096),
    ]
    ops, kernels, runtime, syncs, allocated = read_events(events, level="full", calls=1)
    assert {op.name: op.count for op in ops} == {"aten::mm": 2, "aten::_local_scalar_dense": 1}
    assert [(k.name, k.count) for k in kernels] == [("ampere_sgemm_32x32", 2)]
    assert kernels[0].seconds == pytest.approx(42e-6)
    assert runtime == {
        "cudaDeviceSynchronize": 1,
        "cudaEventSynchronize": 1,
        "cudaLaunchKernel": 2,
        "cudaMemcpyAsync": 1,
        "cudaStreamSynchronize": 1,
    }
    assert syncs == {"stream": 1, "device": 1, "event": 1, "dtoh_copy": 1}
    assert allocated == 4096  # a free is no allocation


def test_a_profile_round_trips_through_its_json_and_older_files_read_as_none() -> None:
    m = measure(two_matmuls, **FAST)
    assert m.profile is not None
    again = Measurement.from_dict(m.to_dict())
    assert again.profile == m.profile
    older = m.to_dict()
    del older["profile"]
    assert Measurement.from_dict(older).profile is None
    assert WorkProfile.from_dict(None) is None


def test_measure_profiles_after_timing_and_the_setting_switches_it_off() -> None:
    m = measure(two_matmuls, **FAST)
    assert m.profile is not None and m.profile.level == "full"
    assert m.profile.per_call_counts()["op:aten::mm"] == Fraction(2)
    assert measure(two_matmuls, profile="off", **FAST).profile is None
    counted = measure(two_matmuls, profile="counts", **FAST).profile
    assert counted is not None and counted.calls == 1


def test_a_bad_profile_level_names_the_choices() -> None:
    with pytest.raises(SettingError, match="profile='some': must be one of: full, counts, off"):
        MeasureSettings().with_values({"profile": "some"})


def test_a_compiled_step_counts_its_graph_breaks() -> None:
    def broken(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        torch._dynamo.graph_break()
        return y + 1

    compiled = torch.compile(broken, backend="eager")
    x = torch.ones(4)
    m = measure(lambda: compiled(x), **FAST)
    assert compile_counters() is not None
    assert m.profile is not None and m.profile.compile is not None
    assert m.profile.compile.graph_breaks >= 1
    assert m.profile.compile.compiles >= 2  # the frame, and the rest after the break
    assert m.profile.compile.compile_seconds is not None and m.profile.compile.compile_seconds > 0


def test_a_step_the_counters_cannot_run_still_gets_its_profile_without_flops() -> None:
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        if len(calls) == 1:  # the counting call
            raise RuntimeError("an op Python's dispatch cannot run")

    profile = profile_step(step, level="counts", step_seconds=1e-6, budget=1.0, on_cuda=False)
    assert profile is not None and profile.flops is None and profile.bytes_copied == {}
    assert profile.calls == 1


def test_ranks_of_a_distributed_run_profile_the_same_one_call_whatever_the_budget() -> None:
    calls: list[int] = []
    profile = profile_step(
        lambda: calls.append(1), level="full", step_seconds=1e-9, budget=10.0, on_cuda=False, max_calls=1
    )
    assert profile is not None and profile.calls == 1
    assert len(calls) == 2  # the counting call and the profiled one


def test_a_profiler_the_user_runs_is_left_alone() -> None:
    with torch.profiler.profile() as theirs:
        assert profile_step(two_matmuls, level="full", step_seconds=1e-6, budget=1.0, on_cuda=False) is None
        two_matmuls()
    assert any(event.name == "aten::mm" for event in theirs.events())
