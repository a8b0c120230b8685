"""The work profile read from what kineto records on CUDA (issue 34, item 1), without a GPU: hand-made event lists
of every kind a real trace holds (``profile_events.py``), read by ``read_events`` and compared by ``compare_work``,
and ``profile_step`` against a recording stand-in of torch's CUDA calls."""

from __future__ import annotations

import dataclasses
import time
from fractions import Fraction
from itertools import count
from typing import Any

import pytest
import torch

from pytest_gpuperf.measuring import PROFILE, Measurement, WorkProfile, measure
from pytest_gpuperf.measuring._profile import compare_work
from pytest_gpuperf.measuring._profiler import (
    CALL_RANGE,
    EAGER_PROFILE,
    EventSummary,
    _profile_from,
    _start_up,
    profile_step,
    read_events,
)

from .profile_events import (
    CALL_NS,
    CUDA,
    GEMM,
    GEMM_NS,
    Event,
    annotation,
    call,
    cuda_sync,
    driver,
    gpu_span,
    kernel,
    matmul_calls,
    memcpy,
    memory,
    memset,
    op,
    runtime,
)


def work(read: EventSummary, calls: int) -> WorkProfile:
    """The profile a CUDA profile of ``calls`` calls makes of what ``read_events`` read."""
    return _profile_from(
        read,
        level="full",
        calls=calls,
        flops=None,
        copied={},
        compiled=None,
        seconds=0.0,
        budget=1.0,
        on_cuda=True,
        write_trace=lambda path: None,
    )


def counts(events: list[Event], calls: int) -> WorkProfile:
    return work(read_events(events, level="full"), calls)


# ------------------------------------------------------------------ F1: GPU spans of ranges are no kernels


def test_kinetos_gpu_spans_of_record_function_ranges_are_no_kernels() -> None:
    """Kineto turns every ``record_function`` range into a device span over its GPU work: the call's own range, and
    torch's optimizer and DataParallel ranges. None is a kernel; the GEMM's time is the kernels' whole time."""
    events = matmul_calls(4)
    start = 2_000_000
    events += [
        call(start, CALL_NS, cid=900),
        annotation("Optimizer.step#Adam.step", start + 1_000, 50_000, cid=901),
        annotation("DataParallel.forward", start + 60_000, 30_000, cid=902),
        op("aten::_foreach_add_", start + 2_000, 10_000, cid=903),
        runtime("cudaLaunchKernel", start + 3_000, cid=904, linked=903),
        kernel("multi_tensor_apply_kernel", start + 5_000, 8_000, cid=904, linked=903),
        gpu_span("Optimizer.step#Adam.step", start + 5_000, 8_000),
        gpu_span("DataParallel.forward", start + 62_000, 1_000),
        gpu_span(CALL_RANGE, start + 5_000, 8_000),
    ]
    read = read_events(events, level="full")
    assert [(k.name, k.count) for k in read.kernels] == [("multi_tensor_apply_kernel", 1), (GEMM, 4)]
    seconds = {k.name: k.seconds for k in read.kernels}
    assert seconds == pytest.approx({GEMM: 4 * GEMM_NS * 1e-9, "multi_tensor_apply_kernel": 8e-6})


def test_the_devices_synchronization_activities_and_profiler_ranges_are_no_kernels_and_copies_no_kernels() -> None:
    """``cuda_sync`` (``enable_cuda_sync_events``) and ``cuda_profiler_range`` are CUDA device events too; a copy and
    a set are read by their activity type, whatever their name."""
    events = [
        call(0, CALL_NS, cid=1),
        op("aten::zero_", 1_000, 5_000, cid=2),
        runtime("cudaMemsetAsync", 2_000, cid=3, linked=2),
        memset(3_000, 1_000, cid=3, linked=2),
        op("aten::copy_", 10_000, 5_000, cid=4),
        runtime("cudaMemcpyAsync", 11_000, cid=5, linked=4),
        memcpy("DtoD (Device -> Device)", 12_000, 1_000, cid=5, linked=4),
        cuda_sync("Stream Sync", 14_000, 2_000),
        Event("CUDA Profiler Range", 0, CALL_NS, device=CUDA, thread=7, activity="cuda_profiler_range"),
    ]
    read = read_events(events, level="full")
    assert read.kernels == ()
    assert read.runtime == {"cudaMemcpyAsync": 1, "cudaMemsetAsync": 1}
    assert set(read.syncs.values()) == {0}


# ------------------------------------------------------------------ F2: runtime calls and syncs of the calls only


def test_the_profilers_own_exit_sync_lies_outside_every_call_and_is_not_counted() -> None:
    read = read_events(matmul_calls(4), level="full")
    assert read.runtime == {"cudaLaunchKernel": 4}
    assert set(read.syncs.values()) == {0}
    assert read.varying == ()


def test_the_same_step_profiled_over_4_and_5_calls_does_the_same_work() -> None:
    """An A/A pair: two processes of the same code profile 4 and 5 calls (the budget decides), each with the
    profiler's exit sync after its last call. It read ``sync:device 1/4 -> 1/5``, verdict ``less``."""
    four, five = counts(matmul_calls(4), 4), counts(matmul_calls(5), 5)
    comparison = compare_work([four], [five])
    assert comparison is not None
    assert comparison.changes == () and comparison.verdict == "same"
    assert four.per_call_counts() == five.per_call_counts()
    assert all(not k.name.startswith(CALL_RANGE) for k in five.kernels)


def test_polling_calls_are_varying() -> None:
    """``cudaEventQuery`` and ``cudaStreamQuery`` ask whether the device got there yet (the pinned host allocator's
    events, a caller's own polling): how often depends on how far the device had got, never on the code."""

    def polled(calls: int, polls: int) -> list[Event]:
        events = matmul_calls(calls)
        for index in range(calls):
            start = 1_000_000 + index * 2 * CALL_NS
            events += [runtime("cudaEventQuery", start + 50_000 + 1_000 * n, 100) for n in range(polls + index)]
            events += [runtime("cudaStreamQuery", start + 90_000, 100)]
        return events

    base, head = counts(polled(4, 1), 4), counts(polled(5, 3), 5)
    assert base.runtime["cudaEventQuery"] == 1 + 2 + 3 + 4
    assert {"runtime:cudaEventQuery", "runtime:cudaStreamQuery"} <= set(base.varying)
    comparison = compare_work([base], [head])
    assert comparison is not None and comparison.verdict == "same"
    assert "runtime:cudaEventQuery" in comparison.varying


def test_a_runtime_call_between_the_calls_is_counted_in_none() -> None:
    """A runtime call that no call range holds (the caching allocator's ``cudaFree`` between calls) is no call's."""
    events = [*matmul_calls(2), runtime("cudaFree", 1_000_000 + CALL_NS + 10_000, 1_000)]
    assert read_events(events, level="full").runtime == {"cudaLaunchKernel": 2}


# ------------------------------------------------------------------ F10: driver API launches


def test_driver_api_launches_are_runtime_calls_and_names_do_not_make_one() -> None:
    """cuBLAS, cuDNN and Triton launch through the driver (``cuLaunchKernel``, kineto's ``cuda_driver``): a compiled
    step's kernels have launches. A host range whose name starts with ``cuda`` is no runtime call."""
    events: list[Event] = []
    for index in range(2):
        start = index * 2 * CALL_NS
        events += [
            call(start, CALL_NS, cid=10 * index + 1),
            annotation("cuda_graphs_warmup", start + 1_000, 2_000, cid=10 * index + 2),
            driver("cuLaunchKernel", start + 5_000, cid=10 * index + 3),
            kernel("triton_poi_fused_add_0", start + 6_000, 2_000, cid=10 * index + 3),
            driver("cuLaunchKernelEx", start + 9_000, cid=10 * index + 4),
            kernel("triton_red_fused_sum_1", start + 10_000, 2_000, cid=10 * index + 4),
        ]
    read = read_events(events, level="full")
    assert read.runtime == {"cuLaunchKernel": 2, "cuLaunchKernelEx": 2}
    assert [(k.name, k.count) for k in read.kernels] == [("triton_poi_fused_add_0", 2), ("triton_red_fused_sum_1", 2)]


# ------------------------------------------------------------------ F3: the counting call stays out


def test_a_kernel_of_no_profiled_call_is_not_counted() -> None:
    """The counting call's queued kernels run on after the profiler starts, and kineto keeps them. Each kernel is
    its launch's: the runtime call of its correlation id, or the op it links to, must lie in a call range. A
    counting-call kernel whose launch the profile never saw, linked to an op outside every call range or to none
    the profile holds, is no call's; a kernel launched right in a call range (no op: Triton's) is its call's."""
    events = matmul_calls(2)
    events += [
        op("aten::mm", 900_000, 5_000, cid=500),  # the counting call's op, ending as the profiler started
        kernel(GEMM, 1_000_100, GEMM_NS, cid=501, linked=500),
        kernel(GEMM, 1_040_100, GEMM_NS, cid=502, linked=499),  # its op was before the profile
        kernel("spin", 1_080_100, GEMM_NS, cid=503),  # its launch was before the profile
        driver("cuLaunchKernel", 1_000_000 + 50_000, cid=504),
        kernel("triton_poi_fused_0", 1_000_000 + 60_000, 1_000, cid=504),
    ]
    read = read_events(events, level="full")
    assert [(k.name, k.count) for k in read.kernels] == [(GEMM, 2), ("triton_poi_fused_0", 1)]
    assert read.kernels[0].seconds == pytest.approx(2 * GEMM_NS * 1e-9)


def test_a_kernel_count_that_differs_between_the_calls_is_varying() -> None:
    """Autotuning: the first call tries a kernel the others do not run."""
    events = matmul_calls(3)
    events += [
        runtime("cudaLaunchKernel", 1_000_000 + 60_000, cid=700),
        kernel("gemm_candidate", 1_000_000 + 70_000, 1_000, cid=700),
    ]
    assert read_events(events, level="full").varying == ("kernel:gemm_candidate", "runtime:cudaLaunchKernel")


class _Recording:
    """What ``profile_step`` asks of torch's CUDA calls and profiler, recorded in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        _start_up(time.perf_counter)  # the process's first profile starts a profiler of its own: not recorded here
        self.order: list[str] = []
        real = torch.autograd.profiler.profile
        order = self.order

        class Profile(real):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, use_device: str | None = None, **kwargs: Any) -> None:
                order.append(f"profiler for {use_device}")
                super().__init__(*args, use_device=None, **kwargs)  # no CUDA on this machine

            def __enter__(self) -> Any:
                order.append("profiler start")
                return super().__enter__()

        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: order.append("synchronize"))
        monkeypatch.setattr(torch.autograd.profiler, "profile", Profile)

    def step(self) -> None:
        self.order.append("call")


def test_on_cuda_the_counting_calls_work_is_drained_before_the_profiler_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _Recording(monkeypatch)
    profile = profile_step(recording.step, level="counts", step_seconds=1e-6, budget=1.0, on_cuda=True)
    assert profile is not None and profile.calls == 1
    assert recording.order == ["call", "synchronize", "profiler for cuda", "profiler start", "call"]


def test_on_a_cpu_nothing_is_synchronized(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _Recording(monkeypatch)
    profile = profile_step(recording.step, level="counts", step_seconds=1e-6, budget=1.0, on_cuda=False)
    assert profile is not None
    assert recording.order == ["call", "profiler for None", "profiler start", "call"]


# ------------------------------------------------------------------ F8: what a sync is


def test_a_device_to_host_copy_is_a_sync_where_the_host_waits_for_it_and_once() -> None:
    """``.item()`` is ``cudaMemcpyAsync`` + ``cudaStreamSynchronize`` (``memcpy_and_sync``): one sync, of a copy. A
    ``non_blocking`` copy into pinned memory makes the host wait for nothing. A synchronous ``cudaMemcpy`` to the
    host waits for its copy; a blocking host-to-device copy waits for its stream; ``torch.cuda.synchronize()`` for
    the device."""
    ids = count(1)

    def copy(name: str, kind: str, start: int, *, then: str | None) -> list[Event]:
        mine, launch = next(ids), next(ids)
        events = [
            op(name, start, 8_000, cid=mine),
            runtime("cudaMemcpy" if then == "" else "cudaMemcpyAsync", start + 1_000, cid=launch, linked=mine),
            memcpy(kind, start + 2_000, 1_000, cid=launch, linked=mine),
            runtime("cudaEventRecord", start + 3_000, cid=next(ids), linked=mine),  # the pinned buffer's event
        ]
        if then:
            events.append(runtime(then, start + 4_000, 2_000, cid=next(ids), linked=mine))
        return events

    events = [
        call(0, 1_000_000, cid=next(ids)),
        *copy("aten::_local_scalar_dense", "DtoH (Device -> Pinned)", 10_000, then="cudaStreamSynchronize"),
        *copy("aten::copy_", "DtoH (Device -> Pinned)", 30_000, then=None),  # non_blocking, into pinned memory
        *copy("aten::copy_", "DtoH (Device -> Pageable)", 50_000, then=""),  # a synchronous cudaMemcpy
        *copy("aten::copy_", "HtoD (Pageable -> Device)", 70_000, then="cudaStreamSynchronize"),
        runtime("cudaDeviceSynchronize", 90_000, 1_000, cid=next(ids)),
        runtime("cudaEventSynchronize", 95_000, 1_000, cid=next(ids)),
        runtime("cudaStreamWaitEvent", 97_000, 1_000, cid=next(ids)),  # the device waits, not the host
    ]
    read = read_events(events, level="full")
    assert read.syncs == {"stream": 1, "device": 1, "event": 1, "dtoh_copy": 2}


# ------------------------------------------------------------------ F13: bytes allocated, by device


def test_bytes_allocated_are_split_by_device() -> None:
    """The CUDA caching allocator's blocks and torch's CPU allocations (MKLDNN's are the CPU's, as torch counts
    them) apart; a free is no allocation."""
    events = [
        *matmul_calls(2),
        memory(1_010_000, 4 << 20, CUDA),
        memory(1_011_000, 4096),
        memory(1_012_000, 512, "DeviceType.MKLDNN"),
        memory(1_013_000, -(4 << 20), CUDA),
        memory(1_210_000, 4 << 20, CUDA),
    ]
    read = read_events(events, level="full")
    assert read.allocated == {"cpu": 4096 + 512, "cuda": 8 << 20}
    profile = work(read, 2)
    assert profile.bytes_allocated == {"cpu": 4608, "cuda": 8 << 20}
    per_call = profile.per_call_counts()
    assert per_call["bytes_allocated:cuda"] == 4 << 20 and per_call["bytes_allocated:cpu"] == 2304
    assert "bytes_allocated" not in per_call
    again = WorkProfile.from_dict(profile.to_dict())
    assert again is not None and again.bytes_allocated == profile.bytes_allocated


def test_a_cuda_profile_that_allocated_nothing_on_the_device_says_zero() -> None:
    """So that a head that allocates on the device, where base did not, is more: not a key that one side lacks."""
    base = counts(matmul_calls(2), 2)
    head = counts([*matmul_calls(2), memory(1_010_000, 1024, CUDA)], 2)
    assert base.bytes_allocated == {"cpu": 0, "cuda": 0}
    comparison = compare_work([base], [head])
    assert comparison is not None and comparison.verdict == "more"
    assert [(c.key, c.head) for c in comparison.changes] == [("bytes_allocated:cuda", Fraction(512))]


def test_a_results_2_profile_with_one_total_of_bytes_allocated_still_loads_and_compares_with_its_kind() -> None:
    """Files written before the split keep one total over every device: it loads as ``all``, compares with another
    such total, and with a split profile not at all (which device its bytes were on is not known)."""
    older = {"level": "full", "calls": 2, "ops": [{"name": "aten::mm", "count": 2, "seconds": None}]}
    old = WorkProfile.from_dict({**older, "bytes_allocated": 8192})
    older_still = WorkProfile.from_dict({**older, "bytes_allocated": 16384})
    assert old is not None and older_still is not None
    assert old.bytes_allocated == {"all": 8192}
    assert old.per_call_counts()["bytes_allocated:all"] == 4096
    both = compare_work([old], [older_still])
    assert both is not None and [c.key for c in both.changes] == ["bytes_allocated:all"]
    new = WorkProfile.from_dict({**older, "bytes_allocated": {"cpu": 4096}})
    assert new is not None
    mixed = compare_work([old], [new])
    assert mixed is not None and mixed.verdict == "same" and mixed.compared == 1
    assert WorkProfile.from_dict({**older, "bytes_allocated": None}) == WorkProfile.from_dict(older)


def test_events_of_a_torch_that_names_no_activity_type_read_the_same() -> None:
    """An older torch's events have no activity type: a device event's flags and names tell."""
    events = [
        *matmul_calls(3),
        driver("cuLaunchKernel", 1_000_000 + 50_000, cid=800),
        kernel("triton_poi_fused_0", 1_000_000 + 60_000, 1_000, cid=800),
        runtime("cudaMemcpyAsync", 1_000_000 + 70_000, cid=801),
        memcpy("DtoH (Device -> Pageable)", 1_000_000 + 71_000, 1_000, cid=801),
        runtime("cudaStreamSynchronize", 1_000_000 + 72_000, cid=802),
        memory(1_000_000 + 73_000, 512, CUDA),
    ]
    bare = [
        dataclasses.replace(
            event, activity="", annotation=event.is_user_annotation(), python=event.is_python_function()
        )
        for event in events
    ]
    assert read_events(bare, level="full") == read_events(events, level="full")
    assert [k.name for k in read_events(bare, level="full").kernels] == [GEMM, "triton_poi_fused_0"]


def _profiled(*, mode: str) -> Measurement:
    """A measurement in ``mode`` with a work profile (made on the CPU: only the labels are under test)."""
    m = measure(lambda: None, device="cpu", max_time=0.01, min_time=0.001, warmup_time=0.001, memory="off")
    return dataclasses.replace(m, mode=mode).with_reading(PROFILE, WorkProfile(level="counts", calls=1))


def test_a_graph_mode_records_work_profile_says_it_is_of_eager_calls() -> None:
    """F12: in graph mode the profiled calls run the eager step, not the replay: its card and the table say so."""
    graph = _profiled(mode="graph")
    warm = _profiled(mode="warm")
    assert PROFILE.facts(graph) == [("work profile", EAGER_PROFILE)]
    assert PROFILE.facts(warm) == []
    assert PROFILE.notes([graph, warm]) == [f"work profile of 1 graph-mode row(s): {EAGER_PROFILE}"]
    assert PROFILE.notes([warm]) == []
    assert "cudaGraphLaunch" in EAGER_PROFILE
