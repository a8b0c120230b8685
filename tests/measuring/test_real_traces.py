"""The profile's reader (``read_events``) on what real GPUs recorded: kineto traces from HolisticTraceAnalysis's
tests, trimmed (``traces/README.md``), presented as torch's raw events (``kineto_trace.py``).

Every expected number was counted in the trace itself (``traces/trim.py`` prints them: a window's runtime calls by
name, and the device activities they launched, by ``cat`` and by ``correlation``), as a GPU engineer reads the trace
in Perfetto; none is computed by the code under test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.autograd.profiler import profile, record_function

from pytest_gpuperf.measuring import WorkProfile
from pytest_gpuperf.measuring._profile import compare_work
from pytest_gpuperf.measuring._profiler import CALL_RANGE, EventSummary, read_events

from .fake_gpu import KinetoGpu
from .kineto_trace import STEPS, TRACES, TraceEvent, events_of, load

#: The names of cuda_sync activities (kineto's ``cuda_sync_kind``) and of copies and sets: never a kernel.
NO_KERNEL = ("Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event", "Memcpy", "Memset", CALL_RANGE)
NCCL_ALL_REDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
NCCL_BROADCAST = "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
SPIN = "at::cuda::(anonymous namespace)::spin_kernel(long)"
#: alexnet's forward calls: the innermost of the benchmark's ranges (each is nested in one of the same name)
ALEXNET_FORWARD = r"\[param\|pytorch\.model\.alex_net\|0\|0\|0\|(warmup|measure)\|forward\]"
OVER_ARCH = "## forward:over_arch ##"


def _trace(name: str, calls: str | None) -> list[TraceEvent]:
    return events_of(load(TRACES / f"{name}.json.gz"), calls=calls)


def _kernels(read: EventSummary) -> dict[str, int]:
    return {k.name: k.count for k in read.kernels}


def _no_kernel_among(kernels: dict[str, int]) -> list[str]:
    return [name for name in kernels if name.startswith(NO_KERNEL) or name.startswith(("nccl:", "## "))]


# ---------------------------------------------------------------- the adapter


def test_the_adapter_gives_the_reader_what_torchs_raw_events_give_it_for_a_cpu_step(tmp_path: Path) -> None:
    """A CPU step under ``torch.profiler`` (memory and Python's tracer on): its exported trace, read through the
    adapter, gives each raw event's accessors (but the thread, which torch numbers from 1 and the trace names by
    its system id, and a host event's device index, which the trace writes as the process id and torch as the
    process id or 0 from one process to the next: the reader reads neither) and the same summary."""
    a = torch.ones(32, 32)
    with profile(profile_memory=True, use_kineto=True, with_stack=True) as prof:
        for _ in range(2):
            with record_function(CALL_RANGE):
                (a @ a).sum().item()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    raw = list(prof.kineto_results.events())
    presented = events_of(load(tmp_path / "trace.json"), calls=None)
    assert len(presented) == len(raw) > 0

    def order(event: Any) -> tuple[int, str]:
        return int(event.start_ns()), str(event.name())

    accessors = (
        "name",
        "activity_type",
        "start_ns",
        "duration_ns",
        "nbytes",
        "is_user_annotation",
        "is_python_function",
        "correlation_id",
        "linked_correlation_id",
        "device_resource_id",
    )
    for theirs, ours in zip(sorted(raw, key=order), sorted(presented, key=order), strict=True):
        assert {a: getattr(ours, a)() for a in accessors} == {a: getattr(theirs, a)() for a in accessors}
        assert ours.device_type() == str(theirs.device_type())
    activities = {e.activity_type() for e in presented}
    assert {"cpu_op", "user_annotation", "python_function", "cpu_instant_event"} <= activities
    assert read_events(presented, level="full") == read_events(raw, level="full")


def test_the_adapter_links_device_work_to_the_op_it_was_launched_under_as_kineto_linked_it() -> None:
    """The Triton trace (kineto of 2024): the kernel and its driver launch share a ``correlation`` and are linked to
    the Triton op (``External id`` 3); the profiler's exit ``cudaDeviceSynchronize`` ran under no op (no ``External
    id``). In the older alexnet trace kineto wrote its own id as ``External id`` where it linked nothing: 0 too."""
    events = {(e.activity_type(), e.name()): e for e in _trace("triton_example", calls=None)}
    op, kernel = events["cpu_op", "triton_poi_fused_add_cos_sin_0"], events["kernel", "triton_poi_fused_add_cos_sin_0"]
    launch, exit_sync = events["cuda_driver", "cuLaunchKernel"], events["cuda_runtime", "cudaDeviceSynchronize"]
    assert (op.activity_type(), op.correlation_id(), op.linked_correlation_id()) == ("cpu_op", 3, 0)
    assert (launch.activity_type(), launch.correlation_id(), launch.linked_correlation_id()) == ("cuda_driver", 35, 3)
    assert (kernel.correlation_id(), kernel.linked_correlation_id(), kernel.device_resource_id()) == (35, 3, 7)
    assert "CUDA" in kernel.device_type() and "CUDA" not in launch.device_type()
    assert exit_sync.linked_correlation_id() == 0
    assert kernel.duration_ns() == 1760  # 1.76 us
    old = [e for e in _trace("alexnet", None) if e.activity_type() in ("kernel", "cuda_runtime")]
    assert len(old) == 79 + 361 and {e.linked_correlation_id() for e in old} == {0}


def test_steps_stand_for_calls_and_the_innermost_of_nested_ranges_is_the_call() -> None:
    calls = [e for e in _trace("alexnet", ALEXNET_FORWARD) if e.name() == CALL_RANGE]
    assert len(calls) == 2 and {e.activity_type() for e in calls} == {"user_annotation"}
    assert sorted(e.duration_ns() for e in calls) == [36_356_000, 12_743_640_000]  # not the outer 79678, 12757093 us
    nccl = _trace("nccl_step5", STEPS)
    assert [e.activity_type() for e in nccl if e.name() == CALL_RANGE] == ["user_annotation"]  # ProfilerStep#5


# ---------------------------------------------------------------- what the reader counts


def test_a_step_with_event_and_stream_syncs_and_a_dtoh_copy_counts_what_the_gpu_ran() -> None:
    """``critical_path/cuda_event_sync`` (A100, one ``ProfilerStep#100``): four kernels (a fill, a sum, a compare and
    a 36 us spin), a ``.item()`` (``cudaMemcpyAsync`` of a ``Memcpy DtoH (Device -> Pageable)``, then
    ``cudaStreamSynchronize``: one wait, the copy's), an event synchronize and a device synchronize. The four
    ``cuda_sync`` activities of those waits (``Stream Sync``, two ``Event Sync``, ``Context Sync``) are no kernels;
    ``cudaEventQuery`` polls."""
    read = read_events(_trace("cuda_event_sync", STEPS), level="full")
    kernels = _kernels(read)
    assert _no_kernel_among(kernels) == []
    assert sum(kernels.values()) == 4 and kernels[SPIN] == 1
    assert {k.name: k.seconds for k in read.kernels}[SPIN] == pytest.approx(36e-6)
    assert read.runtime == {
        "cudaDeviceSynchronize": 1,
        "cudaEventElapsedTime": 1,
        "cudaEventQuery": 1,
        "cudaEventRecord": 2,
        "cudaEventSynchronize": 1,
        "cudaLaunchKernel": 4,
        "cudaMemcpyAsync": 1,
        "cudaStreamSynchronize": 1,
    }
    assert read.syncs == {"stream": 0, "device": 1, "event": 1, "dtoh_copy": 1}  # the .item() waits once (F8)
    assert "runtime:cudaEventQuery" in read.varying


def test_a_triton_kernel_launched_through_the_driver_counts_and_the_profilers_exit_sync_does_not() -> None:
    """``triton_example`` (A100, CUDA 12.0): a compiled region launches one Triton kernel with ``cuLaunchKernel``
    (``cuda_driver``); the profiler's ``cudaDeviceSynchronize`` when it stops lies outside the region, the call."""
    read = read_events(_trace("triton_example", r"Torch-Compiled Region: .*"), level="counts")
    assert _kernels(read) == {"triton_poi_fused_add_cos_sin_0": 1}
    assert read.runtime == {"cuLaunchKernel": 1}
    assert read.syncs["device"] == 0
    everything = read_events(_trace("triton_example", None), level="counts")  # no call range: the whole trace
    assert everything.runtime == {"cuLaunchKernel": 1, "cudaDeviceSynchronize": 1}


def test_alexnet_counts_its_79_kernels_and_none_of_its_41_syncs_or_19_copies_and_sets() -> None:
    """``critical_path/alexnet`` (A100) as a whole, no call range: 79 kernels of 16 names, 41 ``cuda_sync``
    activities (20 ``Stream Wait Event``, 16 ``Stream Sync``, 5 ``Context Sync``), 16 HtoD copies (no sync: the
    host does not wait on them) and 3 memsets."""
    read = read_events(_trace("alexnet", None), level="counts")
    kernels = _kernels(read)
    assert _no_kernel_among(kernels) == []
    assert sum(kernels.values()) == 79 and len(kernels) == 16
    assert read.runtime["cudaLaunchKernel"] == 79
    assert read.runtime["cudaMemcpyAsync"] == 16 and read.runtime["cudaMemsetAsync"] == 5
    assert read.runtime["cudaStreamWaitEvent"] == 34
    assert read.syncs == {"stream": 16, "device": 5, "event": 0, "dtoh_copy": 0}


def test_alexnets_two_forward_calls_run_the_same_39_kernels_and_the_first_ones_setup_varies() -> None:
    """The benchmark's warmup and measured forward as two calls: 39 kernels of 15 names each, the same in both, and
    two ``cudaDeviceSynchronize`` each; the input copies and their 16 stream syncs lie outside the calls. The first
    call sets up (13 ``cudaMalloc`` against 5, 16 streams created, the device's attributes read): that varies."""
    read = read_events(_trace("alexnet", ALEXNET_FORWARD), level="counts")
    kernels = _kernels(read)
    assert _no_kernel_among(kernels) == []
    assert sum(kernels.values()) == 2 * 39 and len(kernels) == 15
    assert all(count % 2 == 0 for count in kernels.values())
    assert read.runtime["cudaLaunchKernel"] == 2 * 39
    assert "cudaMemcpyAsync" not in read.runtime and "cudaStreamSynchronize" not in read.runtime
    assert read.syncs == {"stream": 0, "device": 2 * 2, "event": 0, "dtoh_copy": 0}
    assert {"runtime:cudaMalloc", "runtime:cudaStreamCreateWithFlags"} <= set(read.varying)
    assert "runtime:cudaLaunchKernel" not in read.varying


def test_a_ddp_step_counts_its_nccl_kernels_and_none_of_its_gpu_annotation_spans() -> None:
    """``nccl_parser_config`` (A100, 2 ranks, NCCL 2.17.1), ``ProfilerStep#5`` of a DistributedDataParallel step:
    900 kernels, 7 of them NCCL's (2 broadcasts in the forward, 5 all-reduces in the backward, which torch runs on
    its autograd thread), 320 DtoD copies and 38 memsets; 10 ``gpu_user_annotation`` spans (``nccl:all_reduce``,
    ``## backward ##``, ``DistributedDataParallel.forward``, ...), which are no kernels. The launches: 850
    ``cudaLaunchKernel`` and 50 ``cudaLaunchKernelExC``, on the main thread and on the autograd thread."""
    read = read_events(_trace("nccl_step5", STEPS), level="counts")
    kernels = _kernels(read)
    assert _no_kernel_among(kernels) == []
    assert sum(kernels.values()) == 900
    assert kernels[NCCL_ALL_REDUCE] == 5 and kernels[NCCL_BROADCAST] == 2
    assert read.runtime["cudaLaunchKernel"] == 850 and read.runtime["cudaLaunchKernelExC"] == 50
    assert read.runtime["cudaMemcpyAsync"] == 320 and read.runtime["cudaMemsetAsync"] == 39
    assert read.syncs == {"stream": 0, "device": 0, "event": 8, "dtoh_copy": 0}  # a DtoD copy is no sync
    assert "runtime:cudaEventQuery" in read.varying  # NCCL's watchdog polls


def _counted(read: EventSummary) -> WorkProfile:
    """The profile of one call read from a trace (the reader's counts, as ``profile_step`` makes them)."""
    return WorkProfile(
        level="counts",
        calls=1,
        ops=read.ops,
        kernels=read.kernels,
        runtime=read.runtime,
        syncs=read.syncs,
        varying=read.varying,
    )


def _changes(base: Sequence[WorkProfile], head: Sequence[WorkProfile], category: str) -> dict[str, tuple[int, int]]:
    compared = compare_work(base, head)
    assert compared is not None
    return {c.name: (int(c.base), int(c.head)) for c in compared.changes if c.category == category}


def test_a_base_and_head_pair_shows_the_over_arch_replaced_by_a_cuda_graph_with_its_input_copies() -> None:
    """``trace_diff``'s control (A100, rank 3 of 8) and test (V100, rank 1 of 2) runs of one recommendation model,
    its ``## forward:over_arch ##`` range in ``ProfilerStep#1010`` as the call. The base launches 280 kernels one
    by one; the head launches 33, and one ``cudaGraphLaunch`` that runs 315 more and 24 memsets, after 366 DtoD
    copies into the graph's inputs. Both poll events (``cudaEventQuery``, 132 and 814 times): no change."""
    base = read_events(_trace("trace_diff_control_over_arch", OVER_ARCH), level="counts")
    head = read_events(_trace("trace_diff_test_over_arch", OVER_ARCH), level="counts")
    assert sum(_kernels(base).values()) == 280 and sum(_kernels(head).values()) == 33 + 315
    runtime = _changes([_counted(base)], [_counted(head)], "runtime")
    assert runtime["cudaLaunchKernel"] == (280, 33)
    assert runtime["cudaGraphLaunch"] == (0, 1)
    assert runtime["cudaMemcpyAsync"] == (0, 366)
    assert "cudaEventQuery" not in runtime
    assert _changes([_counted(base)], [_counted(head)], "syncs") == {}  # DtoD copies: the host waits on none
    compared = compare_work([_counted(base)], [_counted(head)])
    assert compared is not None and compared.categories["kernels"] != "same"


# ---------------------------------------------------------------- the stand-in, read as the real traces are


def _pairs(events: Sequence[TraceEvent]) -> set[tuple[str, str, str]]:
    """(runtime call, device activity type, the activity's name where it is no kernel) for each device activity."""
    calls = {e.correlation_id(): e.name() for e in events if e.activity_type() == "cuda_runtime"}
    return {
        (calls[e.correlation_id()], e.activity_type(), e.name() if e.activity_type() != "kernel" else "")
        for e in events
        if "CUDA" in e.device_type() and e.correlation_id() in calls
    }


def _stand_in_run() -> KinetoGpu:
    """Two calls of two kernels and a stream synchronize, then the profiler's exit ``torch.cuda.synchronize()``."""
    gpu = KinetoGpu()
    fake = gpu.torch()
    for _ in range(2):
        with gpu.annotate(CALL_RANGE):
            gpu.kernel("k0", 10e-6)
            gpu.kernel("k1", 20e-6)
            fake.cuda.current_stream().synchronize()
    fake.cuda.synchronize()
    return gpu


def test_the_stand_in_records_its_launches_and_syncs_as_a_real_gpu_recorded_them() -> None:
    """Each pair of host call and device activity the stand-in records is one that the real A100 recorded in the
    ``cuda_event_sync`` trace (a launch and its kernel, ``cudaStreamSynchronize`` and its ``Stream Sync``,
    ``cudaDeviceSynchronize`` and its ``Context Sync``)."""
    ours = _pairs(_stand_in_run().events())
    assert ours == {
        ("cudaLaunchKernel", "kernel", ""),
        ("cudaStreamSynchronize", "cuda_sync", "Stream Sync"),
        ("cudaDeviceSynchronize", "cuda_sync", "Context Sync"),
    }
    assert ours <= _pairs(_trace("cuda_event_sync", STEPS))


def test_the_stand_ins_events_read_as_its_calls_kernels_launches_and_syncs() -> None:
    """The stand-in's kineto-like events through ``read_events``: per call two kernels (10 and 20 us of device
    time), two launches and one stream synchronize; the exit sync is no call's, and neither the calls' GPU spans
    (``gpu_user_annotation``) nor the ``cuda_sync`` activities are kernels."""
    gpu = _stand_in_run()
    events = gpu.events()
    assert {e.activity_type() for e in events} == {"user_annotation", "gpu_user_annotation"} | {
        "cuda_runtime",
        "kernel",
        "cuda_sync",
    }
    read = read_events(events, level="full")
    assert _kernels(read) == {"k0": 2, "k1": 2}
    assert {k.name: k.seconds for k in read.kernels} == pytest.approx({"k0": 2 * 10e-6, "k1": 2 * 20e-6})
    assert read.runtime == {"cudaLaunchKernel": 4, "cudaStreamSynchronize": 2}
    assert read.syncs == {"stream": 2, "device": 0, "event": 0, "dtoh_copy": 0}
    assert read.call_seconds is not None and read.varying == ()
