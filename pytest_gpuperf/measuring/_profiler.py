"""The work profile's reader: a step's calls run under ``torch.profiler`` after timing, outside the timed samples.

Two passes, each outside the timed samples:

* a counting pass: one call under ``torch.utils.flop_counter.FlopCounterMode`` and a dispatch mode that adds up
  the bytes each copy moves between host and device (``_WorkCounter``);
* a profiling pass: ``calls`` calls under ``torch.profiler`` (memory recorded), as many as the budget allows
  (``PROFILE_SHARE`` of the measurement's time, at most ``MAX_CALLS``).

The two cannot share a call: under the profiler, a dispatch mode's own re-dispatch records every op twice. On CUDA
the device is drained between them, so that the counting call's kernels stay out of the profile. On a
CPU the profile rides on the memory probe's calls (``ProbeCalls``), which run under the profiler anyway. The
value it makes, and its comparison, are ``_profile.py``'s.

The profile keeps to its budget at any load and any ``max_time``: before it pays for a part it estimates that part's
cost (a call: the step's measured time, with the profiler's start and stop, ``PROFILER_SECONDS``; reading a call's
events: ``READ_COST``, by their number), and where its floor would pass the budget it reduces itself, in this
order: one profiled call of the probe's two; no counting call (no FLOPs, no copies: own calls only); no profiled
call read (the counting call's figures only); none (``WorkProfile.left_out`` and ``reduced`` say which and why).
The counting call on the probe's settle call costs what the counting mode adds to a call, which nothing tells before
it runs: it is paid, and what is left of the budget goes to the rest. In a distributed run every rank decides the
calls alike (``After.agree``): their collectives must meet.
"""

from __future__ import annotations

import bisect
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from ._calls import gc_paused, torch_threads
from ._profile import SYNC_KINDS, CompileCounters, OpStat, WorkComparison, WorkProfile, compare_work
from ._reading import After, Around, Reading
from ._sampling import SamplingResult
from ._stats import median
from ._units import format_duration
from ._values import stored

if TYPE_CHECKING:
    from ._measurement import Measurement
    from ._settings import MeasureSettings

__all__ = [
    "CALL_RANGE",
    "EAGER_PROFILE",
    "MAX_CALLS",
    "PROFILE",
    "PROFILER_SECONDS",
    "PROFILE_SHARE",
    "READ_COST",
    "READ_SECONDS",
    "READ_SECONDS_PER_EVENT",
    "TRACER_SECONDS_PER_CALL",
    "ProbeCalls",
    "ReadCost",
    "compile_counters",
    "profile_budget",
    "profile_of_probe",
    "profile_step",
    "profiles_of",
    "python_tracing",
    "read_events",
    "tracer_cost",
    "work_profile",
]

#: The profile's budget: this share of the measurement's time (its warmup and samples).
PROFILE_SHARE: Final = 0.03
#: What torch's profiler costs to start and stop around the calls it records, beyond them: 0.8 to 1.0 ms for an
#: empty call range (load average 2.8), 1.2 to 1.6 ms with a call of 10 us (load average 1.3), measured 2026-12-02
#: on the 2-vCPU development machine under ``profile(use_kineto=True, profile_memory=True)``
#: (``bench/evidence/work-profile.md``). Its first start in a process costs more: ``_start_up``.
PROFILER_SECONDS: Final = 1.5e-3
#: What reading one profile's events costs (listing the raw events and ``read_events``): this, whatever their
#: number, and ``READ_SECONDS_PER_EVENT`` an event to begin with (``READ_COST``). Measured 2026-12-02 on the 2-vCPU
#: development machine over the CPU suites (load average 1.8 to 2.8): 0.3 ms for 10 to 24 events, 4 to 15 us an
#: event for hundreds to thousands (79 ms for the 8,080 of a DataLoader step's two calls).
READ_SECONDS: Final = 0.3e-3
READ_SECONDS_PER_EVENT: Final = 10e-6
#: A read of fewer events than this does not teach ``READ_COST`` its cost per event (the fixed part is most of it).
_TAUGHT_BY: Final = 100
#: At most this many calls are profiled (the counts of one call are exact; more calls steady the times).
MAX_CALLS: Final = 5
#: What Python's tracer (level ``full``) costs per Python call it records, in each profiled call: the call's own
#: slowdown (0.2 us) and mostly the profiler's work on the event when it stops and when its events are read. Measured
#: 2026-11-27 on the 2-vCPU development machine: 6 to 8 s for a call of pint's ``UnitRegistry()`` (0.12 s, 869,470
#: Python calls). The tracer runs only where the calls counted on the counting call, at this cost, fit the budget.
TRACER_SECONDS_PER_CALL: Final = 10e-6


class ReadCost:
    """What reading a profile's events costs in this process, to estimate it before paying it: ``READ_SECONDS``
    and ``per_event`` an event, which starts at ``READ_SECONDS_PER_EVENT`` and follows the reads measured (each read
    of ``_TAUGHT_BY`` events or more moves it half way to its own rate, at most 4 times from where it started), so
    that the estimate keeps up with the machine's load."""

    def __init__(self) -> None:
        self.per_event = READ_SECONDS_PER_EVENT

    def estimate(self, events: int) -> float:
        return READ_SECONDS + events * self.per_event

    def observe(self, events: int, seconds: float) -> None:
        """Learn from a read of ``events`` that took ``seconds`` (none from a fake clock's zero)."""
        if events < _TAUGHT_BY or seconds <= 0:
            return
        rate = (seconds - READ_SECONDS) / events
        rate = min(max(rate, READ_SECONDS_PER_EVENT / 4), 4 * READ_SECONDS_PER_EVENT)
        self.per_event = (self.per_event + rate) / 2


#: The process's cost of reading events.
READ_COST: Final = ReadCost()
#: What the profiled calls' events give, and what the counting call gives (``WorkProfile.left_out``).
CALLS_GIVE: Final = ("ops", "kernels", "runtime", "syncs", "allocated")
COUNTING_GIVES: Final = ("flops", "copied")

#: CUDA runtime calls on which the host waits for the device, by the kind of synchronization they are (a
#: ``cudaStreamWaitEvent`` is none: the device waits, not the host). A stream's wait for a device-to-host copy is a
#: ``dtoh_copy`` (``_syncs``).
_SYNC_CALLS: Final = {
    "cudaStreamSynchronize": "stream",
    "cudaDeviceSynchronize": "device",
    "cudaEventSynchronize": "event",
}
#: Synchronous copies: the host waits for the copy itself, a sync where it is one to the host.
_SYNC_COPIES: Final = frozenset({"cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D"})
#: Calls that ask whether the device got somewhere yet (the pinned host allocator's events, a caller's polling):
#: how often they run depends on how far the device had got, so their counts are always varying.
_POLLING: Final = frozenset({"cudaEventQuery", "cudaStreamQuery"})
#: Kineto's activity types of what is counted: the device's kernels, copies and sets, and the host's runtime and
#: driver API calls (cuBLAS, cuDNN and Triton launch through the driver's ``cuLaunchKernel``). Every other device
#: activity (``gpu_user_annotation``: a ``record_function`` range's span over its GPU work; ``cuda_sync``;
#: ``cuda_profiler_range``) is no work of the step's.
_KERNEL: Final = "kernel"
_COPY: Final = "gpu_memcpy"
_DEVICE_WORK: Final = frozenset({_KERNEL, _COPY, "gpu_memset"})
_API_CALLS: Final = frozenset({"cuda_runtime", "cuda_driver"})
#: The device types whose allocations torch's profiler counts as the CPU's (``_cpu_memory_usage``).
_CPU_MEMORY: Final = frozenset({"cpu", "mkldnn", "ideep"})
#: What torch.profiler raises when it cannot start: another profiler already running (the user's own), or a
#: distributed setup it cannot read; then the record has no profile.
_PROFILER_REFUSED: Final = (RuntimeError, ValueError, AssertionError)


class ProfilerEvent(Protocol):
    """What is read of one of the profiler's raw events (``torch.profiler``'s kineto results: reading them costs a
    tenth of building its ``FunctionEvent`` tree, which is most of a profile's cost for a short step).

    ``activity_type`` is kineto's (``kernel``, ``cuda_runtime``, ``cpu_op``, ...). A frontend event (a torch op, a
    ``record_function`` range) has its own ``correlation_id`` and no linked one; a runtime or driver call and the
    device activity it launched share CUPTI's correlation id, and link to the frontend event they ran under."""

    def name(self) -> str: ...

    def device_type(self) -> Any: ...

    def start_ns(self) -> int: ...

    def duration_ns(self) -> int: ...

    def start_thread_id(self) -> int: ...

    def nbytes(self) -> int: ...

    def is_user_annotation(self) -> bool: ...

    def is_python_function(self) -> bool: ...

    def activity_type(self) -> str: ...

    def correlation_id(self) -> int: ...

    def linked_correlation_id(self) -> int: ...


#: What a graph-mode record's work profile is: the profiled calls call the step (``After.fn``), while the samples
#: timed the replays of a graph captured from it, so its runtime calls are a launch per kernel, never a graph launch.
EAGER_PROFILE: Final = (
    "of eager calls of the step, not of the graph's replay (graph mode): a cudaLaunchKernel per kernel, never "
    "cudaGraphLaunch"
)

#: The name of the range each profiled call runs in (``record_function``): it splits the events by call, and its
#: own time outside any op is the step's time outside ops (Python, the host).
CALL_RANGE: Final = "gpuperf call"


@dataclass(frozen=True)
class EventSummary:
    """What ``read_events`` makes of one profile's events (totals over its calls)."""

    ops: tuple[OpStat, ...]
    kernels: tuple[OpStat, ...]
    runtime: dict[str, int]
    syncs: dict[str, int]
    #: bytes allocated by device (``cpu``, ``cuda``)
    allocated: dict[str, int]
    #: the calls' wall time and their time outside any op (the call range's own time), in seconds; None without
    #: a call range among the events
    call_seconds: float | None = None
    outside_seconds: float | None = None
    #: count keys (``op:NAME``, ``runtime:NAME``) whose count differed between the profiled calls
    varying: tuple[str, ...] = ()
    #: the step's calls of built-in Python functions: count, and own time outside any op (``_python_calls``)
    python: tuple[OpStat, ...] = ()


@dataclass
class _Host:
    """A host event while the tree is walked: its name, span, and the time of its children so far."""

    name: str
    start: int
    end: int
    call: bool
    children: int = 0


def read_events(events: Iterable[ProfilerEvent], *, level: str) -> EventSummary:
    """The ops, kernels, runtime calls, synchronizations, bytes allocated, and per call range the calls' time and
    what varied between them.

    Events are told apart by kineto's activity type (``_activity``): a kernel is a device ``kernel`` (a
    ``record_function`` range's span over its GPU work, ``gpu_user_annotation``, is none); a runtime call is a host
    ``cuda_runtime`` or ``cuda_driver`` call; an allocation is a ``[memory]`` event of positive size, counted by its
    device (``_memory_device``). Where the events hold call ranges (every profile this package takes), only the
    calls' work counts: runtime calls and syncs that lie in a call range (the profiler's own ``cudaDeviceSynchronize``
    on leaving lies in none), and the device work of launches that do (``_launch_call``: a kernel queued by the
    counting call before the profiler started is no call's). Syncs are the host's waits, each counted once
    (``_syncs``). An op's self time is its span less its children's on its thread. Times are kept in seconds
    (dropped at level ``counts``); over two calls or more, each op's time, the time outside ops and the calls' wall
    time are their least over the calls (``_least``): a call preempted on a busy machine only adds time (one such
    call made an op of unchanged count rank above a planted matmul), and the parts add up to the wall time (scaled
    by the quickest whole call instead, the ops' minima left the rest to the time outside ops)."""
    ops: dict[str, list[float]] = {}
    kernels: dict[str, list[float]] = {}
    runtime: dict[str, int] = {}
    allocated: dict[str, int] = {}
    host: list[tuple[int, str, ProfilerEvent]] = []
    device: list[tuple[str, ProfilerEvent]] = []
    builtins: list[tuple[int, int, int, str]] = []
    for event in events:
        name = event.name()
        if name == "[memory]":
            if int(event.nbytes()) > 0:
                where = _memory_device(event.device_type())
                allocated[where] = allocated.get(where, 0) + int(event.nbytes())
        elif "CUDA" in str(event.device_type()):
            kind = _activity(event)
            if kind in _DEVICE_WORK:
                device.append((kind, event))
        elif event.is_python_function():
            if name.startswith("<built-in") or _RANGE_EXIT.search(name):
                start = int(event.start_ns())
                builtins.append((int(event.start_thread_id()), start, start + int(event.duration_ns()), name))
        else:
            host.append((int(event.start_thread_id()), _activity(event), event))
    on_thread = {  # each call range's span, and the thread it ran on (the step's)
        (int(e.start_ns()), int(e.start_ns()) + int(e.duration_ns())): thread
        for thread, _, e in host
        if e.name() == CALL_RANGE and e.is_user_annotation()
    }
    spans = sorted(on_thread)
    per_call: list[dict[str, int]] = [{} for _ in spans]
    per_call_ns: list[dict[str, int]] = [{} for _ in spans]
    calls: list[_Host] = []
    tops: dict[int, list[tuple[int, int]]] = {}  # per thread, the spans of the host events right in a call range
    api_calls: dict[int, list[tuple[int, str, int]]] = {}  # per thread, the runtime calls counted: start, name, id
    for thread in sorted({t for t, _, _ in host}):
        stack: list[_Host] = []
        ordered = sorted(
            ((k, e) for t, k, e in host if t == thread),
            key=lambda ke: (int(ke[1].start_ns()), -int(ke[1].duration_ns())),
        )
        for kind, event in ordered:
            start, name = int(event.start_ns()), event.name()
            node = _Host(
                name, start, start + int(event.duration_ns()), name == CALL_RANGE and event.is_user_annotation()
            )
            while stack and stack[-1].end <= start:
                _close(stack.pop(), ops, spans, per_call_ns)
            if stack:
                stack[-1].children += node.end - node.start
                if stack[-1].call:
                    tops.setdefault(thread, []).append((node.start, node.end))
            stack.append(node)
            if node.call:
                calls.append(node)
            elif kind in _API_CALLS and (not spans or _call_of(spans, start) is not None):
                runtime[name] = runtime.get(name, 0) + 1
                api_calls.setdefault(thread, []).append((start, name, int(event.correlation_id())))
                _count_in_call(spans, per_call, node, "runtime:")
            elif name.startswith("aten::"):
                _count_in_call(spans, per_call, node, "op:")
        while stack:
            _close(stack.pop(), ops, spans, per_call_ns)
    to_host = _device_work(device, host, spans, kernels, per_call)
    timed = level == "full"
    call_seconds, outside = _least(ops, calls, spans, per_call_ns)
    keys = {k for counts in per_call for k in counts}
    varying = {k for k in keys if len({counts.get(k, 0) for counts in per_call}) > 1}
    varying |= {f"runtime:{name}" for name in runtime if name in _POLLING}
    return EventSummary(
        _stats(ops, timed),
        _stats(kernels, timed),
        dict(sorted(runtime.items())),
        _syncs(api_calls, to_host),
        dict(sorted(allocated.items())),
        call_seconds if timed else None,
        outside if timed else None,
        tuple(sorted(varying)),
        _python_calls(builtins, tops, spans, on_thread) if timed else (),
    )


def _activity(event: ProfilerEvent) -> str:
    """Kineto's activity type of ``event``; where a torch's events do not say (an older torch's have no
    ``activity_type``), what its device, flags and name tell."""
    read = getattr(event, "activity_type", None)
    kind = read() if callable(read) else None
    if isinstance(kind, str) and kind:
        return kind
    name = event.name()
    if "CUDA" in str(event.device_type()) and name != "[memory]":
        if event.is_user_annotation():
            return "gpu_user_annotation"
        return _COPY if name.startswith("Memcpy") else "gpu_memset" if name.startswith("Memset") else _KERNEL
    if event.is_python_function():
        return "python_function"
    if event.is_user_annotation():
        return "user_annotation"
    if name.startswith("cuda"):
        return "cuda_runtime"
    return "cuda_driver" if name.startswith("cu") else "cpu_op"


def _memory_device(device_type: object) -> str:
    """``cpu`` or ``cuda`` (another device by its type's name): whose allocator a ``[memory]`` event's bytes are.
    Pinned host memory is not among them: torch's pinned host allocator reports nothing to the profiler."""
    name = str(device_type).rsplit(".", 1)[-1].lower()
    return "cpu" if name in _CPU_MEMORY else name


def _device_work(
    device: Iterable[tuple[str, ProfilerEvent]],
    host: Iterable[tuple[int, str, ProfilerEvent]],
    spans: list[tuple[int, int]],
    kernels: dict[str, list[float]],
    per_call: list[dict[str, int]],
) -> set[int]:
    """Count the kernels into ``kernels`` (and by call into ``per_call``) where their launch is a profiled call's
    (``_launch_call``); return the correlation ids of the device-to-host copies (``Memcpy DtoH ...``), by which
    their runtime calls are told (``_syncs``)."""
    if not device:
        return set()
    launches: dict[int, int] = {}  # CUPTI's correlation id of a runtime call -> its start
    frontend: dict[int, int] = {}  # a torch op's or range's correlation id -> its start
    for _, kind, event in host:
        cid = int(event.correlation_id())
        if kind in _API_CALLS:
            launches[cid] = int(event.start_ns())
        elif not int(event.linked_correlation_id()):
            frontend[cid] = int(event.start_ns())
    launches.pop(0, None)
    frontend.pop(0, None)
    to_host = set()
    for kind, event in device:
        cid, name = int(event.correlation_id()), event.name()
        if kind == _COPY and cid and name.startswith("Memcpy DtoH"):
            to_host.add(cid)
        if kind != _KERNEL:
            continue
        counted, at = _launch_call(cid, int(event.linked_correlation_id()), spans, launches, frontend)
        if counted:
            _add(kernels, name, float(event.duration_ns()))
            if at is not None:
                per_call[at]["kernel:" + name] = per_call[at].get("kernel:" + name, 0) + 1
    return to_host


def _launch_call(
    cid: int, linked: int, spans: list[tuple[int, int]], launches: Mapping[int, int], frontend: Mapping[int, int]
) -> tuple[bool, int | None]:
    """Whether a device activity counts, and the index of its call (None where none is known). Without call ranges
    every one counts. Else it is its launch's: the runtime call of its correlation id (``launches``), or else the
    op or range it links to (``frontend``), must lie in a call range. One whose launch and op the profile does not
    hold was launched before the profile started (the counting call's, still queued), and counts in no call; one
    without an id to look them up by (a profile that recorded no runtime call) counts, its call unknown."""
    if not spans:
        return True, None
    start = launches.get(cid) if cid else None
    if start is None and linked:
        start = frontend.get(linked)
    if start is None:
        return not ((cid and launches) or linked), None
    at = _call_of(spans, start)
    return at is not None, at


def _syncs(api_calls: Mapping[int, list[tuple[int, str, int]]], to_host: set[int]) -> dict[str, int]:
    """The host's waits for the device, by kind (``SYNC_KINDS``), each counted once, from each thread's runtime calls
    in order (``start, name, correlation id``). A wait is a ``_SYNC_CALLS`` call, or a synchronous copy to the host
    (``_SYNC_COPIES``: ``dtoh_copy``). A stream's wait that follows a device-to-host copy on its thread (``.item()``
    and ``.cpu()`` are ``cudaMemcpyAsync`` + ``cudaStreamSynchronize``) is that copy's: ``dtoh_copy``, not
    ``stream``. A copy the host never waits for (``non_blocking`` into pinned memory) is no sync."""
    syncs = dict.fromkeys(SYNC_KINDS, 0)
    for thread in sorted(api_calls):
        copied = False  # a device-to-host copy was queued on this thread since its last wait
        for _, name, cid in sorted(api_calls[thread]):
            if cid in to_host and name not in _SYNC_COPIES:
                copied = True
                continue
            kind = "dtoh_copy" if cid in to_host else _SYNC_CALLS.get(name)
            if kind is None:
                continue
            syncs["dtoh_copy" if kind == "stream" and copied else kind] += 1
            copied = False
    return syncs


#: A built-in function's or method's name as Python's tracer gives it: ``<built-in method item of Tensor object at
#: 0x7f...>``, ``<built-in function sleep>``.
_BUILTIN: Final = re.compile(r"<built-in (?:method|function) (?P<name>[^\s>]*)(?: ?of (?P<owner>[\w.]+) object)?")


#: The Python frame of a ``record_function`` range's exit, as the tracer names it (``torch/autograd/profiler.py(932):
#: __exit__``): the range ends inside it, so its built-ins (torch's op that ends the range, a pybind11 function, and
#: what dispatching it calls) lie in the call range, and are no step's.
_RANGE_EXIT: Final = re.compile(r"torch/autograd/profiler\.py\(\d+\): __exit__$")


def _python_name(raw: str) -> str:
    """``Tensor.item`` for a method of a Tensor object, ``sleep`` for a function (or a method of a type object,
    whose type the tracer does not name): the address each name carries differs between processes."""
    found = _BUILTIN.match(raw)
    if found is None:
        return re.sub(r" at 0x[0-9a-fA-F]+", "", raw)
    name, owner = found.group("name"), found.group("owner")
    if owner and owner != "type":
        return f"{owner}.{name}" if name else owner  # a pybind11 function, whose method has no name
    return name or raw


def _python_calls(
    builtins: list[tuple[int, int, int, str]],
    tops: Mapping[int, list[tuple[int, int]]],
    spans: list[tuple[int, int]],
    on_thread: Mapping[tuple[int, int], int],
) -> tuple[OpStat, ...]:
    """The step's calls of built-in Python functions (``Tensor.item``, ``sleep``, ``dot``), from the Python tracer's
    events (``thread, start, end, raw name``): count, and own time outside any op.

    The tracer records every thread's calls: only those on a call range's own thread (``on_thread``) are the
    step's; another thread's, at the same time, are not (the plugin's load monitor takes a lock and reads
    ``/proc/stat`` while the step runs, ``_load.py``). A built-in counts where it runs right in a call range on its
    thread, outside any host event there (``tops``: an op, autograd's range), outside another built-in (that one
    holds its time) and outside the range's exit (``_RANGE_EXIT``); its own time is its span, cut at its call's
    end, less the host events it holds. That time lies in the call's time outside any op, which is how ``.item()``'s
    Python-to-C++ call or a sleep gets a name. Over two calls or more, a built-in that ran in every call takes its
    least time over them, times the calls, as ops do (``_least``): so the built-ins' times never add up to more
    than the time outside ops."""
    per_call: list[dict[str, int]] = [{} for _ in spans]
    counts: dict[str, int] = {}
    for thread in sorted({b[0] for b in builtins}):
        held_by = sorted(tops.get(thread, ()))
        starts = [start for start, _ in held_by]
        outer_end = -1
        for _, start, end, raw in sorted((b for b in builtins if b[0] == thread), key=lambda b: (b[1], -b[2])):
            at = _call_of(spans, start)
            if start < outer_end or at is None or on_thread[spans[at]] != thread:
                continue
            first = bisect.bisect_right(starts, start) - 1
            if first >= 0 and held_by[first][1] > start:
                continue  # called from inside an op (a Python hook under autograd): the op holds its time
            end = min(end, spans[at][1])
            outer_end = end
            if _RANGE_EXIT.search(raw):
                continue
            held, index = 0, first + 1
            while index < len(held_by) and held_by[index][0] < end:
                held += min(held_by[index][1], end) - held_by[index][0]
                index += 1
            name = _python_name(raw)
            counts[name] = counts.get(name, 0) + 1
            per_call[at][name] = per_call[at].get(name, 0) + max(end - start - held, 0)
    out = []
    for name in sorted(counts):
        times = [call.get(name) for call in per_call]
        if len(times) > 1 and all(t is not None for t in times):
            total = min(t for t in times if t is not None) * len(times)
        else:
            total = sum(t for t in times if t is not None)
        out.append(OpStat(name, counts[name], total * 1e-9))
    return tuple(out)


def _close(
    node: _Host, ops: dict[str, list[float]], spans: list[tuple[int, int]], per_call_ns: list[dict[str, int]]
) -> None:
    if node.name.startswith("aten::"):
        own = node.end - node.start - node.children
        _add(ops, node.name, float(own))
        call = _call_of(spans, node.start)
        if call is not None:
            per_call_ns[call][node.name] = per_call_ns[call].get(node.name, 0) + own


def _call_of(spans: list[tuple[int, int]], start: int) -> int | None:
    """The index of the call range whose span holds ``start`` (calls do not overlap), or None."""
    at = bisect.bisect_right(spans, (start, sys.maxsize)) - 1
    return at if at >= 0 and start < spans[at][1] else None


def _count_in_call(spans: list[tuple[int, int]], per_call: list[dict[str, int]], node: _Host, prefix: str) -> None:
    """Count ``node`` in the call range whose span holds its start."""
    at = _call_of(spans, node.start)
    if at is not None:
        key = prefix + node.name
        per_call[at][key] = per_call[at].get(key, 0) + 1


def _least(
    ops: dict[str, list[float]], calls: list[_Host], spans: list[tuple[int, int]], per_call_ns: list[dict[str, int]]
) -> tuple[float | None, float | None]:
    """The calls' wall time and their time outside ops, in seconds (None, None without a call range).

    Over two calls or more, each part takes its least time over the calls, times the calls: each op that ran in
    every call (its time in ``ops`` is replaced), the time outside ops, and the rest of a call (the own time of
    host events that are no aten op: autograd's and the optimizer's ranges). The wall time is the sum of those
    parts and of the ops that ran in some calls only (their totals: work that varies), so that the parts add up
    to it: a call preempted in one op on a busy machine makes no part grow."""
    if not calls:
        return None, None
    n = len(calls)
    if n == 1:
        only = calls[0]
        return (only.end - only.start) * 1e-9, (only.end - only.start - only.children) * 1e-9
    outside = min(c.end - c.start - c.children for c in calls)
    indexed = [(c, _call_of(spans, c.start)) for c in calls]
    rest = min(
        (c.children - sum(per_call_ns[at].values()) for c, at in indexed if at is not None),
        default=0,
    )
    every = some = 0.0
    for name, entry in ops.items():
        times = [call.get(name) for call in per_call_ns]
        if all(t is not None for t in times):
            least = min(t for t in times if t is not None)
            entry[1] = float(least * n)
            every += least
        else:
            some += sum(t for t in times if t is not None)
    wall = (every + outside + max(rest, 0)) * n + some
    return wall * 1e-9, outside * n * 1e-9


def _add(table: dict[str, list[float]], name: str, nanoseconds: float) -> None:
    entry = table.setdefault(name, [0.0, 0.0])
    entry[0] += 1
    entry[1] += nanoseconds


def _stats(table: Mapping[str, list[float]], timed: bool) -> tuple[OpStat, ...]:
    """Sorted by name, so that two profiles of the same work have the same order."""
    return tuple(OpStat(name, int(count), ns * 1e-9 if timed else None) for name, (count, ns) in sorted(table.items()))


def compile_counters() -> CompileCounters | None:
    """torch.compile's counters now, or None where dynamo was never imported (importing it costs seconds, and a
    step that was never compiled has nothing to count)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return None
    counters = getattr(utils, "counters", {})
    breaks = sum(int(v) for v in counters.get("graph_break", {}).values())
    compiles = int(counters.get("frames", {}).get("total", 0))
    metrics = getattr(utils, "compilation_time_metrics", None)
    seconds = None
    if isinstance(metrics, Mapping):
        seconds = sum(float(t) for key, times in metrics.items() if "compile_inner" in str(key) for t in times)
    return CompileCounters(breaks, compiles, seconds)


def _counting_pass(
    fn: Callable[[], object], *, python_limit: float | None = None
) -> tuple[int | None, dict[str, int], int | None]:
    """FLOPs and host-device bytes of one call (None, {} where the counters fail on the step: an op that
    Python's dispatch cannot run must not fail a test whose timing went through), and with ``python_limit`` the
    Python calls the step made in it, as Python's tracer would record them, counted until they pass that limit
    (``_PythonCalls``; None where not counted). It comes before the profiled calls, so it also opens the process's
    first call range: that one costs most of a millisecond (its op is looked up), which stays out of the profiled
    calls."""
    _first_call_range()
    counter = _WorkCounter()
    skipped = type(counter.mode).__torch_dispatch__.__code__
    python = None if python_limit is None else _PythonCalls(skipped, python_limit)
    try:
        with counter:
            if python is None:
                fn()
            else:
                with python:
                    fn()
    except Exception:  # noqa: BLE001 - any failure of the counters leaves the figures unknown
        return None, {}, None
    return counter.flops, counter.moved, None if python is None else python.calls


def _first_call_range() -> None:
    """Open a call range and leave it: the process's first costs most of a millisecond (its op is looked up), which
    so stays out of the profiled calls."""
    with _call_range():
        pass


#: What the profile's start-up took in this process, once it ran (``_start_up``).
_STARTED: list[float] = []


def _start_up(clock: Callable[[], float]) -> float:
    """The profile's start-up in this process, run by its first profile and not held against that profile's budget
    (it is the process's, as torch's import is): the first call range (its op looked up), the counting mode's
    imports (``torch.utils.flop_counter``) and, where no profiler runs yet, torch's profiler's first start: 9 to 13
    ms, measured 2026-12-02 on the 2-vCPU development machine at load averages 1.3 and 3.5
    (``bench/evidence/work-profile.md``). Its seconds the first time, 0 after."""
    if _STARTED:
        return 0.0
    import torch
    from torch.autograd.profiler import profile

    start = clock()
    _first_call_range()
    _WorkCounter()
    if not torch.autograd._profiler_enabled():  # type: ignore[attr-defined]
        with profile(use_kineto=True, profile_memory=True):
            pass
    _STARTED.append(clock() - start)
    return _STARTED[0]


class _PythonCalls:
    """Counts the Python calls a step makes (functions and built-ins: what Python's tracer records), through
    ``sys.setprofile``, leaving out what the counting mode's own ``__torch_dispatch__`` runs (that code runs in
    the counting call only), and stops counting past ``limit`` (the tracer's cost would pass its budget). It costs
    about 0.45 us a Python call (measured with pint's ``UnitRegistry()``: a twentieth of what the tracer costs over
    two calls, so that it stops well within the budget), next to nothing for a step whose time is in torch's ops."""

    def __init__(self, skipped: Any, limit: float) -> None:
        self.calls = 0
        self._skipped = skipped
        self._limit = limit
        self._inside: object = None

    def __enter__(self) -> None:
        sys.setprofile(self._event)

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)

    def _event(self, frame: Any, event: str, arg: object) -> None:
        if self._inside is not None:
            if event == "return" and frame is self._inside:
                self._inside = None
        elif event == "call" and frame.f_code is self._skipped:
            self._inside = frame
        elif event in ("call", "c_call"):
            self.calls += 1
            if self.calls > self._limit:
                sys.setprofile(None)  # enough to know: the tracer's cost would pass its budget


def tracer_cost(python_calls: int | None, calls: int) -> float:
    """What Python's tracer would cost over ``calls`` profiled calls of a step that makes ``python_calls`` Python
    calls (``TRACER_SECONDS_PER_CALL``); infinite where they were not counted."""
    return math.inf if python_calls is None else python_calls * calls * TRACER_SECONDS_PER_CALL


class _WorkCounter:
    """One dispatch mode that adds up each op's FLOPs (by ``torch.utils.flop_counter``'s formulas, those
    ``FlopCounterMode`` applies) and the bytes each copy moves between the host and a device (by direction).

    ``FlopCounterMode`` itself also tracks the module each op ran in, through hooks on every module call: for a
    training step of a few milliseconds that doubled the counting call's cost, and the total is all we keep."""

    def __init__(self, *, ignore_compile_internals: bool = False) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import flop_registry

        counter = self

        class Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]
            @classmethod
            def ignore_compile_internals(cls) -> bool:
                # True: torch.compile compiles under the mode as without it, and the mode sees the compiled code's
                # ops (a first call under a mode that does not would be left uncompiled for good).
                return ignore_compile_internals

            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                # torch wraps a mode's __torch_dispatch__ to keep dynamo out of it, and the wrapper imports dynamo
                # on the first op (1.2 s, once per process). Only a process that has loaded dynamo can run
                # compiled code under this mode: the wrapper is needed there only.
                return "torch._dynamo" in sys.modules

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = kwargs or {}
                counter.ops += 1
                out = func(*args, **kwargs)
                packet = func.overloadpacket
                formula = flop_registry.get(packet)
                if formula is not None:
                    counter.flops += int(formula(*args, **kwargs, out_val=out))
                counter.note(str(packet.__name__), args, out)
                return out

        self.mode = Mode()  # type: ignore[no-untyped-call]
        self.flops = 0
        #: the ops dispatched under the mode (the timing checks count a first call's, ``_timing_checks.py``)
        self.ops = 0
        self.moved: dict[str, int] = {}

    def __enter__(self) -> _WorkCounter:
        self.mode.__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(*exc)  # type: ignore[no-untyped-call]

    def note(self, op: str, args: Any, out: Any) -> None:
        import torch

        if op not in ("copy_", "_to_copy", "_local_scalar_dense"):
            return
        source = args[1] if op == "copy_" else args[0]
        if not isinstance(source, torch.Tensor):
            return
        target = out.device if isinstance(out, torch.Tensor) else torch.device("cpu")
        direction = _direction(source.device, target)
        if direction:
            size = source.numel() * source.element_size()
            self.moved[direction] = self.moved.get(direction, 0) + size


def _direction(source: Any, target: Any) -> str:
    """``htod``, ``dtoh``, or empty for a copy that stays on one side (a device-to-device copy is no host's)."""
    src_host, dst_host = source.type == "cpu", target.type == "cpu"
    if src_host and not dst_host:
        return "htod"
    if dst_host and not src_host:
        return "dtoh"
    return ""


class ProbeCalls:
    """The work profile taken on the memory probe's calls, where the probe runs the step under the profiler anyway
    (the CPU's: one call that settles, two measured in profiler windows of their own, ``_cpu_memory.py``).

    The settle call runs under the counting mode (FLOPs and copies), each measured call in a call range; the
    profile then reads the probe's windows, and costs no call of its own. ``peak_memory`` drives it."""

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        *,
        python: bool = False,
        budget: float = math.inf,
        traced_calls: int = 2,
        step_seconds: float = 0.0,
    ) -> None:
        #: whether the measured calls run under Python's tracer too (level ``full``: ``WorkProfile.python``); asked
        #: for, it is kept after the settle call only where the tracer's cost over the ``traced_calls`` measured
        #: calls fits what the settle call left of ``budget`` (its time beyond ``step_seconds``, the measured time
        #: of a call; ``tracer_cost`` of the Python calls counted there)
        self.python = python
        self.budget = budget
        self.traced_calls = traced_calls
        self.step_seconds = step_seconds
        #: the Python calls of the settle call, where counted
        #: the measured calls' wall time, in seconds
        self.call_times: list[float] = []
        self.python_calls: int | None = None
        self.flops: int | None = None
        self.copied: dict[str, int] = {}
        self.counted = False
        #: the measured calls' profilers, and the events each recorded, set by ``peak_memory`` from the probe
        self.windows: list[Any] = []
        self.events: list[int] = []
        #: the settle call's time (the counting mode's cost is its time beyond a step's), and the profile's start-up
        #: in this process before it (``_start_up``: not held against the budget)
        self.settle_seconds = 0.0
        self.started = 0.0
        self._clock = clock

    def settle(self, fn: Callable[[], object]) -> None:
        """Run the settle call under the counting mode; where the mode cannot run the step, run it plainly (the
        probe needs the call, and the profile then has no FLOPs). Decides whether the measured calls run under
        Python's tracer (``python``)."""
        self.started = _start_up(self._clock)
        start = self._clock()
        limit = self.budget / (self.traced_calls * TRACER_SECONDS_PER_CALL) if self.python else None
        self.flops, self.copied, self.python_calls = _counting_pass(fn, python_limit=limit)
        if self.flops is None:
            fn()  # the counters failed on the step, not the step: run it as it is
        self.counted = True
        self.settle_seconds = self._clock() - start
        left = self.budget - max(self.settle_seconds - self.step_seconds, 0.0)
        self.python = self.python and tracer_cost(self.python_calls, self.traced_calls) <= left

    def call_range(self) -> _TimedRange:
        return _TimedRange(self.call_times, self._clock)


class _TimedRange:
    """A call range (``_call_range``) that adds its wall time to ``times``. No generator-based context manager: its
    ``__exit__`` calls the built-in ``next`` inside the range, which Python's tracer would name as the step's."""

    def __init__(self, times: list[float], clock: Callable[[], float]) -> None:
        self._times, self._clock, self._range = times, clock, _call_range()
        self._start = 0.0

    def __enter__(self) -> None:
        self._start = self._clock()
        self._range.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._range.__exit__(*exc)
        self._times.append(self._clock() - self._start)


def profile_of_probe(
    probe: ProbeCalls,
    *,
    level: str,
    step_seconds: float,
    budget: float,
    compiled: CompileCounters | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> WorkProfile | None:
    """The work profile read from the memory probe's calls (``ProbeCalls``), or None where the probe took no
    window (then ``profile_step`` profiles calls of its own). ``seconds`` is what the profile added: the reading,
    the counting mode's time on the settle call beyond a step's, and the tracer's on the measured calls. The reading
    of the windows' events (``READ_COST``, by the events the probe counted) takes what fits: both where they fit
    what is left of the budget, the first alone where it fits what the tracer left of it, or none (the counting
    call's figures only, or no profile)."""
    if level == "off" or not probe.counted or not probe.windows:
        return None
    start = clock()
    # Python's tracer slows the measured calls, which the probe would otherwise run under its profiler alone:
    # their time beyond a timed call's is counted, the profiler's share of it too (an upper bound)
    traced = sum(max(t - step_seconds, 0.0) for t in probe.call_times) if probe.python else 0.0
    paid = max(probe.settle_seconds - step_seconds, 0.0) + traced  # the start-up (``probe.started``) is not held
    events = probe.events if len(probe.events) == len(probe.windows) else [0] * len(probe.windows)
    # The floor, one window's reading, may take what the plan left it (the budget less the tracer's cost, decided on
    # the settle call: the counting mode's cost there is paid unestimated); a second window only what is left.
    left = budget - paid
    floor = max(left, budget - (tracer_cost(probe.python_calls, len(probe.windows)) if probe.python else 0.0))
    allowed = [floor] + [left] * (len(probe.windows) - 1)  # to read the first 1, 2 windows
    read = len(probe.windows)
    while read and READ_COST.estimate(sum(events[:read])) > allowed[read - 1]:
        read -= 1
    over = _over(read + 1, sum(events[: read + 1]), allowed[min(read, len(allowed) - 1)], budget)
    if not read:
        seconds = paid + probe.started + clock() - start
        return _unread(level, probe.flops, probe.copied, compiled, seconds, budget, over)
    results = [_raw_events(window) for window in probe.windows[:read]]
    if any(listed is None for listed in results):
        return None
    listed = [event for window in results if window is not None for event in window]
    summary = read_events(listed, level=level)
    READ_COST.observe(len(listed), clock() - start)
    return _profile_from(
        summary,
        level=level,
        calls=read,
        flops=probe.flops,
        copied=probe.copied,
        compiled=compiled,
        seconds=clock() - start + paid + probe.started,
        budget=budget,
        on_cuda=False,
        write_trace=probe.windows[read - 1].export_chrome_trace,
        reduced=f"{read} profiled call of the memory probe's {len(probe.windows)}: {over}"
        if read < len(probe.windows)
        else "",
    )


def profile_step(
    fn: Callable[[], object],
    *,
    level: str,
    step_seconds: float,
    budget: float,
    on_cuda: bool,
    compiled: CompileCounters | None = None,
    max_calls: int = MAX_CALLS,
    clock: Callable[[], float] = time.perf_counter,
    agree: Callable[[bool], bool] | None = None,
) -> WorkProfile | None:
    """Profile ``fn`` (see the module's docstring); None at level ``off``.

    ``step_seconds`` is the measured time of one call; ``budget`` the seconds the profile may cost. Its floor is a
    counting call and a profiled call, each of ``step_seconds``, and the profiler's start and stop
    (``PROFILER_SECONDS``), estimated before either runs: where the floor would pass the budget the counting call is
    left out (no FLOPs, no copies), and where the profiled call alone would, the profile is none (a ``WorkProfile``
    of no call that says why). ``agree`` (a distributed run's, ``After.agree``) makes every rank decide alike: the
    step's collectives must meet. Where reading the profiled call's events (``READ_COST``) would pass what the
    floor's calls left of the budget (by their estimates, or by the clock where they took less), they are not read.
    Calls are added in a second session while the next one, at the cost the first profiled call and its reading
    showed, still fits what is left (level ``counts``: one call; ``max_calls`` caps them, 1 where every rank of a
    distributed run must make the same calls)."""
    if level == "off":
        return None
    import torch

    if torch.autograd._profiler_enabled():  # type: ignore[attr-defined]
        return None  # the user's own profiler is running: a second would end its session
    on_cuda = on_cuda and torch.cuda.is_available()  # a stand-in for CUDA has no kernels to record
    start = clock()
    one_call = step_seconds + PROFILER_SECONDS
    counting = _agreed(step_seconds + one_call <= budget, agree)
    if not _agreed(one_call <= budget, agree):
        over = (
            f"one profiled call ({format_duration(step_seconds)}, and the profiler's start and stop) would pass the "
            f"{format_duration(budget)} budget"
        )
        return _unread(level, None, {}, compiled, clock() - start, budget, over)
    started = _start_up(clock)  # before ``start``: not held against the budget
    start = clock()
    reduced = (
        ""
        if counting
        else f"no counting call: with it, the floor (a counting call and a profiled call of "
        f"{format_duration(step_seconds)}, and the profiler's start and stop) would pass the "
        f"{format_duration(budget)} budget"
    )
    flops: int | None = None
    copied: dict[str, int] = {}
    python_calls: int | None = None
    if counting:
        flops, copied, python_calls = _counting_pass(
            fn, python_limit=budget / TRACER_SECONDS_PER_CALL if python_tracing(level) else None
        )
    if on_cuda:
        # Kineto keeps every device activity that starts in its window: the counting call's queued kernels would
        # run on into it (those that still do are no call's, ``read_events``).
        torch.cuda.synchronize()
    # Python's tracer only where its cost for one call fits what is left of the budget; its cost is in each call's
    tracing = tracer_cost(python_calls, 1)
    traced = tracing <= budget - (clock() - start) - one_call
    first = clock()
    prof = _profiled(fn, 1, on_cuda=on_cuda, traced=traced)
    if prof is None:
        return None
    each = max(clock() - first, step_seconds) + (tracing if traced else 0.0)
    listing = clock()
    events = _raw_events(prof)
    if events is None:
        return None
    listed = list(events)
    listing = clock() - listing  # the raw events listed: a part of their reading, which ``READ_COST`` learns
    reading = READ_COST.estimate(len(listed))
    left = budget - (clock() - start)
    floor = max(left, budget - (step_seconds if counting else 0.0) - one_call)  # what the floor's calls were let cost
    if reading > floor:
        seconds = clock() - start + started
        return _unread(level, flops, copied, compiled, seconds, budget, _over(1, len(listed), floor, budget))
    calls = 1
    if level == "full" and max_calls > 1:
        # more calls in a second session: each costs a call and its events' reading, the session the profiler's
        more = math.floor((left - reading - PROFILER_SECONDS) / max(each + reading - READ_SECONDS, 1e-9))
        more = min(max(more, 0), max_calls - 1)
        if more:
            again = _profiled(fn, more, on_cuda=on_cuda, traced=traced)
            later_start = clock()
            later = None if again is None else _raw_events(again)
            if later is not None:
                listed.extend(later)
                calls += more
            listing += clock() - later_start
    reading_start = clock()
    summary = read_events(listed, level=level)
    READ_COST.observe(len(listed), listing + clock() - reading_start)
    return _profile_from(
        summary,
        level=level,
        calls=calls,
        flops=flops,
        copied=copied,
        compiled=compiled,
        seconds=clock() - start + started,
        budget=budget,
        on_cuda=on_cuda,
        write_trace=prof.export_chrome_trace,
        reduced=reduced,
        counted=counting,
    )


def _agreed(fits: bool, agree: Callable[[bool], bool] | None) -> bool:
    """``fits``, on every rank of a distributed run only where it is on all (``agree``: True where any rank's is)."""
    return fits if agree is None else not agree(not fits)


def _profiled(fn: Callable[[], object], calls: int, *, on_cuda: bool, traced: bool) -> Any:
    """``calls`` calls of ``fn``, each in a call range, under torch's profiler (memory recorded); the profiler, or
    None where it refused to start. A step that fails under the profiler after a call of it ran raises: that is the
    step's error, not the profiler's."""
    # torch.autograd's profiler, which ``torch.profiler.profile`` wraps: the wrapper's start asks
    # ``hasattr(torch, "_inductor")``, which imports inductor and dynamo (1.2 s, once per process).
    from torch.autograd.profiler import profile

    ran = 0
    try:
        with profile(
            use_device="cuda" if on_cuda else None, profile_memory=True, use_kineto=True, with_stack=traced
        ) as prof:
            for _ in range(calls):
                with _call_range():
                    fn()
                ran += 1
    except _PROFILER_REFUSED:
        if ran:
            raise
        return None
    return prof


def _over(calls: int, events: int, left: float, budget: float) -> str:
    """``reading 2 calls' 1,200 events would take about 12.3 ms, over the 5 ms left of the 25 ms budget``."""
    of = f"{format_duration(budget)} budget"
    where = of if left >= budget else f"{format_duration(max(left, 0.0))} left of the {of}"
    whose = "1 call's" if calls == 1 else f"{calls} calls'"
    return (
        f"reading {whose} {events:,} events would take about {format_duration(READ_COST.estimate(events))}, over "
        f"the {where}"
    )


def _unread(
    level: str,
    flops: int | None,
    copied: dict[str, int],
    compiled: CompileCounters | None,
    seconds: float,
    budget: float,
    why: str,
) -> WorkProfile:
    """A profile whose calls were not read, to keep within its budget: the counting call's figures where it ran
    (``flops`` not None), else none but torch.compile's counters (which cost nothing); ``why`` says why, after which
    of the two."""
    counted = flops is not None
    return WorkProfile(
        level=level,
        calls=0,
        flops=flops,
        bytes_copied=copied,
        compile=compiled,
        seconds=seconds,
        budget=budget,
        left_out=CALLS_GIVE if counted else COUNTING_GIVES + CALLS_GIVE,
        reduced=("the counting call's figures only: " if counted else "not profiled: ") + why,
    )


def _profile_from(
    read: EventSummary,
    *,
    level: str,
    calls: int,
    flops: int | None,
    copied: dict[str, int],
    compiled: CompileCounters | None,
    seconds: float,
    budget: float,
    on_cuda: bool,
    write_trace: Callable[[str], object],
    reduced: str = "",
    counted: bool = True,
) -> WorkProfile:
    """The profile of ``calls`` read calls; the counting call's figures left out where it did not run (``counted``)
    or its counters failed on the step (``flops`` None)."""
    return WorkProfile(
        level=level,
        calls=calls,
        ops=read.ops,
        kernels=read.kernels,
        runtime=read.runtime,
        syncs=read.syncs if on_cuda else {},
        flops=flops,
        # the devices watched, each said even where nothing was allocated there: a count of zero, not one unknown
        bytes_allocated=dict(sorted({"cpu": 0, **({"cuda": 0} if on_cuda else {}), **read.allocated}.items())),
        bytes_copied=copied,
        compile=compiled,
        seconds=seconds,
        budget=budget,
        write_trace=write_trace,
        call_seconds=read.call_seconds,
        outside_seconds=read.outside_seconds,
        varying=read.varying,
        python=read.python,
        left_out=() if counted and flops is not None else COUNTING_GIVES,
        reduced=reduced,
    )


def python_tracing(level: str) -> bool:
    """Whether profiled calls run under Python's tracer too, which names the built-ins that hold time outside ops
    (``WorkProfile.python``): at level ``full``, unless a profile function is set (``sys.setprofile``: cProfile,
    yappi), which the tracer would replace for good (torch's tracer clears it when it stops)."""
    return level == "full" and sys.getprofile() is None


def _call_range() -> Any:
    """The range each profiled call runs in (``record_function(CALL_RANGE)``)."""
    from torch.autograd.profiler import record_function

    return record_function(CALL_RANGE)


def _raw_events(prof: Any) -> Iterable[ProfilerEvent] | None:
    """The profiler's raw events (its kineto results), or None where a torch keeps them elsewhere: then the record
    has no profile (a comparison reads that as unknown), rather than one with nothing counted."""
    results = getattr(prof, "kineto_results", None)
    return None if results is None else results.events()


# ---------------------------------------------------------------- the reading


def work_profile(
    fn: Callable[[], object],
    settings: MeasureSettings,
    device: str,
    result: SamplingResult,
    compiled_before: CompileCounters | None = None,
    *,
    share_of: int = 1,
    max_calls: int = MAX_CALLS,
    probe: ProbeCalls | None = None,
    agree: Callable[[bool], bool] | None = None,
) -> WorkProfile | None:
    """The step's work profile after timing, within ``PROFILE_SHARE`` of the measurement's time (its warmup and
    samples; paired rounds of ``share_of`` steps give each its share); None where ``settings.profile`` is off. The
    step time it is given is the median sample (a paired round's: an overestimate, which only profiles fewer
    calls). Where ``probe`` rode on the memory probe's calls (the CPU's), the profile is read from them and runs no
    call of its own; ``agree`` is a distributed run's (``profile_step``)."""
    if settings.profile == "off":
        return None
    compiled = compile_counters()
    if compiled is not None and compiled_before is not None:
        compiled = compiled.since(compiled_before)  # else dynamo was first loaded by this step: all its counts are
    step = median(result.samples) if result.samples else 0.0
    budget = profile_budget(result, share_of)
    if probe is not None:
        riding = profile_of_probe(probe, level=settings.profile, step_seconds=step, budget=budget, compiled=compiled)
        if riding is not None:
            return riding
    with torch_threads(settings.threads_for(device)), gc_paused():
        return profile_step(
            fn,
            level=settings.profile,
            step_seconds=step,
            budget=budget,
            on_cuda=device.split(":", 1)[0] == "cuda",
            compiled=compiled,
            max_calls=max_calls,
            agree=agree,
        )


def profile_budget(result: SamplingResult, share_of: int = 1) -> float:
    """The work profile's budget: ``PROFILE_SHARE`` of the measurement's warmup and sampling time (a paired round's
    step gets its share)."""
    return PROFILE_SHARE * (result.seconds + result.warmup.seconds) / share_of


@dataclass(frozen=True)
class _Compiled:
    """The profile's sensor: torch.compile's counters before the sampling, from which a step's compiles count."""

    before: CompileCounters | None

    def after_block(self, iterations: int, seconds: float) -> None:
        pass

    def value(self, samples: int) -> None:
        return None


class _Profile(Reading[WorkProfile]):
    name = "profile"
    change_key = "work"

    @contextmanager
    def open(self, around: Around) -> Iterator[_Compiled]:
        yield _Compiled(compile_counters())

    def prepare(self, after: After) -> bool:
        """On a CPU the profile rides on the memory probe's calls (``ProbeCalls``): it reads after the probe."""
        if after.settings.profile == "off" or after.skip:
            return False
        level = after.settings.profile
        step = median(after.result.samples) if after.result.samples else 0.0
        budget = profile_budget(after.result, after.share_of)
        after.rider = ProbeCalls(python=python_tracing(level), budget=budget, step_seconds=step)
        return True

    def after(self, after: After, sensor: object) -> WorkProfile | None:
        if after.skip:
            return None
        return work_profile(
            after.fn,
            after.settings,
            after.device,
            after.result,
            sensor.before if isinstance(sensor, _Compiled) else None,
            share_of=after.share_of,
            # Every rank of a distributed run profiles the same calls (one), so that their collectives meet.
            max_calls=1 if after.distributed else MAX_CALLS,
            probe=after.rider if isinstance(after.rider, ProbeCalls) else None,
            agree=after.agree,
        )

    def to_json(self, value: WorkProfile) -> dict[str, Any]:
        return value.to_dict()

    def decode(self, data: Mapping[str, Any]) -> WorkProfile | None:
        return stored(data, "profile", WorkProfile.from_dict, None)

    def facts(self, m: Measurement) -> list[tuple[str, str]]:
        facts = [("work profile", EAGER_PROFILE)] if m.profile is not None and m.mode == "graph" else []
        return facts + ([("work profile", m.profile.reduced)] if m.profile is not None and m.profile.reduced else [])

    def notes(self, measurements: Sequence[Measurement]) -> list[str]:
        graphs = sum(m.profile is not None and m.mode == "graph" for m in measurements)
        notes = [f"work profile of {graphs} graph-mode row(s): {EAGER_PROFILE}"] if graphs else []
        reduced = sum(m.profile is not None and bool(m.profile.reduced) for m in measurements)
        if reduced:
            notes.append(
                f"work profile reduced in {reduced} row(s) to keep within its budget ({PROFILE_SHARE:.0%} of the "
                "measuring time): each record's profile.reduced says what it left out"
            )
        return notes

    def compare(self, base: Sequence[Measurement], head: Sequence[Measurement]) -> WorkComparison | None:
        return compare_work(profiles_of(base), profiles_of(head))


def profiles_of(measurements: Iterable[Measurement]) -> tuple[WorkProfile, ...]:
    """The work profiles of those ``measurements`` that have one."""
    return tuple(m.profile for m in measurements if m.profile is not None)


#: What the step did per call, read after timing outside the samples.
PROFILE: Final = _Profile()
