"""Stand-ins for torch.profiler's raw kineto events (``torch._C._autograd._KinetoEvent``), as ``read_events`` reads
them: every kind a real CUDA trace holds, with kineto's activity types and correlation ids.

A frontend event (a torch op, ``cpu_op``; a ``record_function`` range, ``user_annotation``) has its own
``correlation_id`` and no linked one. A runtime or driver call (``cuda_runtime``, ``cuda_driver``) and the device
activity it launched (``kernel``, ``gpu_memcpy``, ``gpu_memset``) share CUPTI's correlation id, and both link to the
frontend event they ran under (``linked_correlation_id``), as torch's ``_parse_kineto_results`` pairs them. Kineto
also turns each ``record_function`` range into a device span over its GPU work (``gpu_user_annotation``), and keeps
the device's synchronization activities (``cuda_sync``). Times are in nanoseconds."""

from __future__ import annotations

from itertools import count

from pytest_gpuperf.measuring._profiler import CALL_RANGE

from .kineto_trace import TraceEvent

#: The host thread runtime calls are recorded on (kineto's system thread id, not torch's own thread numbers).
RUNTIME_THREAD = 1001
#: A device event's "thread": its stream.
STREAM = 7


#: One raw event: the real traces' stand-in (``kineto_trace.TraceEvent``), whose ``is_user_annotation`` and
#: ``is_python_function`` follow its activity type as torch's do.
Event = TraceEvent


CUDA = "DeviceType.CUDA"


def op(name: str, start: int, span: int, *, cid: int = 0, thread: int = 1) -> Event:
    """A torch op (``cpu_op``), of correlation id ``cid``."""
    return Event(name, start, span, thread=thread, correlation=cid)


def call(start: int, span: int, *, cid: int = 0) -> Event:
    """A profiled call's range (``record_function(CALL_RANGE)``, ``user_annotation``)."""
    return annotation(CALL_RANGE, start, span, cid=cid)


def annotation(name: str, start: int, span: int, *, cid: int = 0) -> Event:
    """A ``record_function`` range on the host (torch's ``Optimizer.step#Adam.step``, ``DataParallel.forward``)."""
    return Event(name, start, span, activity="user_annotation", correlation=cid)


def runtime(
    name: str, start: int, span: int = 500, *, cid: int = 0, linked: int = 0, thread: int = RUNTIME_THREAD
) -> Event:
    """A CUDA runtime API call (``cuda_runtime``): ``cid`` is CUPTI's correlation id, ``linked`` the op's."""
    return Event(name, start, span, thread=thread, activity="cuda_runtime", correlation=cid, linked=linked)


def driver(
    name: str, start: int, span: int = 500, *, cid: int = 0, linked: int = 0, thread: int = RUNTIME_THREAD
) -> Event:
    """A CUDA driver API call (``cuda_driver``: cuBLAS's, cuDNN's and Triton's ``cuLaunchKernel``)."""
    return Event(name, start, span, thread=thread, activity="cuda_driver", correlation=cid, linked=linked)


def kernel(name: str, start: int, span: int, *, cid: int = 0, linked: int = 0) -> Event:
    """A kernel on the device (``kernel``), launched by the runtime call of correlation id ``cid``."""
    return Event(name, start, span, device=CUDA, thread=STREAM, activity="kernel", correlation=cid, linked=linked)


def memcpy(kind: str, start: int, span: int, *, cid: int = 0, linked: int = 0) -> Event:
    """A copy on the device (``gpu_memcpy``), named as kineto names it: ``kind`` ``DtoH (Device -> Pinned)``."""
    return Event(
        f"Memcpy {kind}", start, span, device=CUDA, thread=STREAM, activity="gpu_memcpy", correlation=cid, linked=linked
    )


def memset(start: int, span: int, *, cid: int = 0, linked: int = 0) -> Event:
    """A memory set on the device (``gpu_memset``)."""
    return Event(
        "Memset (Device)",
        start,
        span,
        device=CUDA,
        thread=STREAM,
        activity="gpu_memset",
        correlation=cid,
        linked=linked,
    )


def gpu_span(name: str, start: int, span: int) -> Event:
    """Kineto's device span of a ``record_function`` range over its GPU work (``gpu_user_annotation``)."""
    return Event(name, start, span, device=CUDA, thread=STREAM, activity="gpu_user_annotation")


def cuda_sync(name: str, start: int, span: int) -> Event:
    """One of the device's synchronization activities (``cuda_sync``: ``Stream Sync``, ``Event Sync``)."""
    return Event(name, start, span, device=CUDA, thread=STREAM, activity="cuda_sync")


def memory(start: int, size: int, device: str = "DeviceType.CPU") -> Event:
    """An allocation (``size`` > 0) or a free (``size`` < 0) by one of torch's allocators (``cpu_instant_event``)."""
    return Event("[memory]", start, device=device, size=size, activity="cpu_instant_event")


def py(name: str, start: int, span: int, *, thread: int = 1) -> Event:
    """A Python tracer's event: a function of the step's (``file.py(3): step``) or a built-in it calls, on
    ``thread`` (another thread's: the plugin's load monitor, a user's data loader thread)."""
    return Event(name, start, span, thread=thread, activity="python_function")


#: A GEMM kernel's name, as cuBLAS names one on an H100.
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32"
#: How long one profiled call lasts on the host, and one GEMM on the device.
CALL_NS = 100_000
GEMM_NS = 40_000


def matmul_calls(calls: int, *, exit_sync: bool = True, ids: count[int] | None = None) -> list[Event]:
    """``calls`` profiled calls of one matmul on CUDA, as kineto records them. Each call: its range; an ``aten::mm``
    with its ``cudaLaunchKernel``; the GEMM kernel; and kineto's GPU span of the range (``gpuperf call`` on the
    device). With ``exit_sync``, the ``cudaDeviceSynchronize`` that torch's profiler makes on leaving
    (``torch.autograd.profiler.profile.__exit__``) follows the last range."""
    ids = ids or count(1)
    events: list[Event] = []
    for index in range(calls):
        start = 1_000_000 + index * 2 * CALL_NS
        mm, launch = next(ids), next(ids)
        events += [
            call(start, CALL_NS, cid=next(ids)),
            op("aten::mm", start + 10_000, 20_000, cid=mm),
            runtime("cudaLaunchKernel", start + 15_000, 3_000, cid=launch, linked=mm),
            kernel(GEMM, start + 20_000, GEMM_NS, cid=launch, linked=mm),
            gpu_span(CALL_RANGE, start + 20_000, GEMM_NS),
        ]
    if exit_sync:
        end = 1_000_000 + calls * 2 * CALL_NS
        events.append(runtime("cudaDeviceSynchronize", end, 50_000))
    return events
